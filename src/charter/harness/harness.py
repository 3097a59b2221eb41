"""The harness: model tool-calling loops over one host, and the sessions it opens.

Every tool call of every session goes through ``Host.invoke``, so scopes, tenancy, the
ledger and approvals all apply to model calls as to MCP or HTTP calls.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..auth import Principal
from ..errors import ConfigurationError
from ..host import Host
from .definitions import BoundToolDefinition, Capability, bind_tools
from .live import DEFAULT_MAX_LIVE_SESSIONS, LiveSessions
from .messages import Model
from .seal import CallMiddleware
from .session import Session
from .store import MemorySessionStore, SessionStore
from .turns import HarnessEvent, Observer

__all__ = ("Harness",)


class Harness:
    """Runs model tool-calling loops over one host; ``harness.session(principal)`` opens one."""

    def __init__(
        self,
        host: Host,
        model: Model,
        *,
        capabilities: Sequence[Capability[Any]] = (),
        tools: Sequence[str] | None = None,
        middleware: Sequence[CallMiddleware] = (),
        store: SessionStore | None = None,
        observer: Observer | None = None,
        max_steps: int = 16,
        audience: str | None = None,
        lease: timedelta = timedelta(minutes=5),
        max_live_sessions: int = DEFAULT_MAX_LIVE_SESSIONS,
        clock: Callable[[], datetime] | None = None,
        new_id: Callable[[], str] | None = None,
    ) -> None:
        """Build a harness.

        Args:
            host: every tool call goes through ``host.invoke``.
            model: takes one step at a time.
            capabilities: tool groups with session-local state; their tools must be
                registered with ``host.registry`` (``capability.register(registry)``).
            tools: the registry tools to offer besides the capabilities' (by name);
                None offers every tool the session's principal may call.
            middleware: reviews each sealed call before it runs.
            store: keeps session records; defaults to memory (not durable).
            observer: receives ``HarnessEvent``s.
            max_steps: model steps per turn before it ends as ``max_steps``.
            audience: the audience calls are made for (defaults to the principal's).
            lease: how long a run holds a session before another process may take over
                (only matters after a crash).
            max_live_sessions: how many sessions keep their in-process state
                (capability state) here; beyond it the least recently run idle ones are
                forgotten, and start with fresh state when run or resumed again. A
                session whose run is in progress is always kept.
            clock: the current UTC time (injected by tests).
            new_id: makes turn, step and invocation ids (injected by tests).

        Raises:
            ConfigurationError: a capability's tool is not registered, or ``max_steps``
                or ``max_live_sessions`` is not positive.
        """
        if max_steps < 1:
            raise ConfigurationError("max_steps must be at least 1")
        self.host = host
        self.model = model
        self.capabilities = tuple(capabilities)
        self.tool_names = tuple(tools) if tools is not None else None
        self.middleware = tuple(middleware)
        self.store: SessionStore = store if store is not None else MemorySessionStore()
        self.observer = observer
        self.max_steps = max_steps
        self.audience = audience
        self.lease = lease
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))
        self.new_id: Callable[[], str] = new_id or (lambda: uuid.uuid4().hex)
        self.live = LiveSessions(max_live_sessions)
        """What sessions keep in this process: cancel signals, capability state."""
        # Fail at construction when a capability's tools are not registered.
        bind_tools(host.registry, host.registry.tools(), self.capabilities, ())

    def session(self, principal: Principal | None, session_id: str | None = None) -> Session:
        """A handle on a session of ``principal`` (a new one when ``session_id`` is None)."""
        return Session(self, principal, session_id or "ses_" + self.new_id())

    def bound_tools(self, principal: Principal | None) -> dict[str, BoundToolDefinition]:
        """The tools a session of ``principal`` offers the model, by canonical name."""
        visible = self.host.callable_tools(principal, self.audience)
        return bind_tools(self.host.registry, visible, self.capabilities, self.tool_names)

    async def emit(self, event: HarnessEvent) -> None:
        """Report ``event`` to the observer (awaiting it when it is async)."""
        if self.observer is not None:
            result = self.observer(event)
            if inspect.isawaitable(result):
                await result
