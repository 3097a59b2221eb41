"""What a session keeps in this process: its cancel signal and its capabilities' state.

Neither is in the session record: a cancel signal reaches only a run in this process,
and capability state (``Capability.state_factory``) lives as long as the session does
here. A resume in another process starts with fresh state.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..context import CancelSignal
from .definitions import Capability

__all__ = ("LiveSession", "LiveSessions")


class LiveSession:
    """One session's in-process state: the running turn's cancel signal, capability state."""

    def __init__(self) -> None:
        """Start with no run in progress and no capability state."""
        self.cancel: CancelSignal | None = None
        """The cancel signal of the run or resume in progress here (None between runs)."""
        self.states: dict[str, object] = {}
        """Capability state by capability id."""
        self.lock = asyncio.Lock()

    async def state(self, capability: Capability[Any] | None) -> object:
        """The state of ``capability`` in this session, created on first use (None if none)."""
        if capability is None or capability.state_factory is None:
            return None
        async with self.lock:
            if capability.id not in self.states:
                self.states[capability.id] = await capability.create_state()
            return self.states[capability.id]


class LiveSessions:
    """The in-process state of every session of one harness, by session id."""

    def __init__(self) -> None:
        """Start with no sessions."""
        self._sessions: dict[str, LiveSession] = {}

    def get(self, session_id: str) -> LiveSession | None:
        """The session's state, or None when no run of it happened in this process."""
        return self._sessions.get(session_id)

    def open(self, session_id: str) -> LiveSession:
        """The session's state, created on first use."""
        live = self._sessions.get(session_id)
        if live is None:
            live = self._sessions[session_id] = LiveSession()
        return live
