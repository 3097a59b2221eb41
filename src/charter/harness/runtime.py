"""What a session's turns run with: the host, the model, the store and the settings.

``Harness`` is the one implementation; sessions, turns and resumes depend on this
protocol instead, so they never import the class that creates them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from ..auth import Principal
from ..host import Host
from .definitions import BoundToolDefinition
from .live import LiveSessions
from .messages import Model
from .seal import CallMiddleware
from .store import SessionStore
from .turns import HarnessEvent, Observer

__all__ = ("Runtime",)


class Runtime(Protocol):
    """Protocol: the parts of a harness its sessions use (see ``Harness`` for each)."""

    host: Host
    model: Model
    middleware: tuple[CallMiddleware, ...]
    store: SessionStore
    max_steps: int
    audience: str | None
    lease: timedelta
    clock: Callable[[], datetime]
    """The current UTC time."""
    new_id: Callable[[], str]
    """Makes turn, step and invocation ids."""
    live: LiveSessions
    observer: Observer | None
    """Receives the turns' events; None when nobody listens (then none is built)."""

    def bound_tools(self, principal: Principal | None) -> dict[str, BoundToolDefinition]:
        """The tools a session of ``principal`` offers the model, by canonical name."""
        ...

    async def emit(self, event: HarnessEvent) -> None:
        """Report ``event`` to the observer."""
        ...
