"""What a session keeps in this process: its cancel signal and its capabilities' state.

Neither is in the session record: a cancel signal reaches only a run in this process,
and capability state (``Capability.state_factory``) lives as long as the session does
here. A resume in another process starts with fresh state.

The harness forgets a session's state here when the session is stopped
(``Session.stop``), and when more than ``max_sessions`` sessions are kept, the least
recently run idle ones (paused sessions included): a later run or resume of a forgotten
session starts with fresh capability state, as a resume in another process does. A
session whose run or resume is in progress here is never forgotten, so its cancel
signal keeps working; while more runs than ``max_sessions`` are in progress, more
sessions are kept, until their runs end.

A session's state here is its owner's, as its record is: every look-up by session id
names the owner (``Owner``), and finds nothing kept for another principal.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any, TypeAlias

from ..context import CancelSignal
from ..errors import ConfigurationError
from .definitions import Capability

__all__ = ("DEFAULT_MAX_LIVE_SESSIONS", "LiveSession", "LiveSessions", "Owner")

DEFAULT_MAX_LIVE_SESSIONS = 1000
"""How many sessions' state a harness keeps here by default (``Harness(max_live_sessions=)``)."""

Owner: TypeAlias = tuple[str, str]
"""Whose a session is: ``(subject, tenant_id)`` of its principal (``("anonymous", "")``
without one), compared whole, as ``SessionLease`` compares it with the record's."""


class LiveSession:
    """One session's in-process state: the running turn's cancel signal, capability state."""

    def __init__(self, owner: Owner) -> None:
        """Start ``owner``'s session with no run in progress and no capability state."""
        self.owner = owner
        """The principal whose run started the session here."""
        self.cancel: CancelSignal | None = None
        """The cancel signal of the run or resume in progress here (None between runs)."""
        self.states: dict[str, object] = {}
        """Capability state by capability id."""
        self.stopped = False
        """The session was stopped while a run was in progress: forget it when the run ends."""
        self.lock = asyncio.Lock()

    @property
    def running(self) -> bool:
        """True while a run or resume of the session is in progress here."""
        return self.cancel is not None

    async def state(self, capability: Capability[Any] | None) -> object:
        """The state of ``capability`` in this session, created on first use (None if none)."""
        if capability is None or capability.state_factory is None:
            return None
        async with self.lock:
            if capability.id not in self.states:
                self.states[capability.id] = await capability.create_state()
            return self.states[capability.id]


class LiveSessions:
    """The in-process state of a harness's sessions, by session id, least recently run first."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_LIVE_SESSIONS) -> None:
        """Start with no sessions; keep at most ``max_sessions`` idle ones.

        Raises:
            ConfigurationError: ``max_sessions`` is not positive.
        """
        if max_sessions < 1:
            raise ConfigurationError("max_live_sessions must be at least 1")
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, LiveSession] = OrderedDict()

    def __len__(self) -> int:
        """How many sessions' state is kept."""
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        """True when the session's state is kept."""
        return session_id in self._sessions

    def get(self, session_id: str, owner: Owner) -> LiveSession | None:
        """The session's state, or None when none is kept here for ``owner``."""
        live = self._sessions.get(session_id)
        return live if live is not None and live.owner == owner else None

    def start(self, session_id: str, cancel: CancelSignal, owner: Owner) -> LiveSession:
        """Mark ``owner``'s run of the session in progress with ``cancel``; its state, kept or new.

        The caller has checked that the session's record is ``owner``'s (or created it).
        """
        live = self._sessions.get(session_id)
        if live is None or live.stopped or live.owner != owner:
            # A stopped session's run is still ending: this run starts afresh beside it.
            # Another owner's state (its record since gone from the store) is not handed on.
            live = self._sessions[session_id] = LiveSession(owner)
        self._sessions.move_to_end(session_id)
        live.cancel = cancel
        self._trim()
        return live

    def finish(self, session_id: str, live: LiveSession, cancel: CancelSignal) -> None:
        """The run with ``cancel`` ended: forget the session if it was stopped, then trim."""
        if live.cancel is cancel:
            live.cancel = None
        if live.stopped and not live.running and self._sessions.get(session_id) is live:
            del self._sessions[session_id]
        self._trim()

    def forget(self, session_id: str, owner: Owner) -> None:
        """Forget ``owner``'s session state: now, or when the run in progress here ends."""
        live = self.get(session_id, owner)
        if live is None:
            return
        if live.running:
            live.stopped = True
        else:
            del self._sessions[session_id]

    def _trim(self) -> None:
        """Forget the least recently run idle sessions beyond ``max_sessions``."""
        excess = len(self._sessions) - self.max_sessions
        if excess <= 0:
            return
        idle: list[str] = []
        for session_id, live in self._sessions.items():  # oldest first
            if not live.running:
                idle.append(session_id)
                if len(idle) == excess:
                    break
        for session_id in idle:
            del self._sessions[session_id]
