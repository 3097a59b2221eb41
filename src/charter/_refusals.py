"""Refusals, aggregated: a flood of refused calls is a few audit rows.

Anyone can send calls no key backs, so one audit row per refused anonymous call would let a
stranger grow the audit table without bound; an agent in a loop that keeps hitting a rate
limit would do the same with a key. Per kind of refusal (the caller, the tool, or
``(unknown)`` for a name that is no tool, the code and the reason) the first refusal of a
window is recorded as it happens; the others in that window are counted, and recorded as
one event with ``count`` by the first refusal of any kind that comes after the window, or
when the host closes. The host aggregates anonymous refusals and ``RATE_LIMITED`` ones;
every other call made with a key is recorded on its own.

No timer: each ``admit`` closes the windows that ended, oldest first (windows are kept in
the order they started, so it looks past only those it closes). A count waits for the
next refusal or for the host to close; a crash before either loses it (the first refusal
of its window is recorded).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .audit import AuditEvent

__all__ = ("RefusalAggregator",)

_Kind = tuple[str | None, str | None, str, str | None, str | None]

_MAX_KINDS = 4096
"""Kinds tracked at once; past it, the oldest pending counts are recorded early."""


@dataclass(kw_only=True, slots=True)
class _Window:
    started: datetime
    pending: AuditEvent | None = None
    """The latest counted refusal, and how many it stands for (``count``)."""


class RefusalAggregator:
    """Turns refused calls into one recorded event per kind per window."""

    def __init__(self, window: timedelta, clock: Callable[[], datetime]) -> None:
        """Aggregate over ``window`` (a positive duration) by ``clock``."""
        self.window = window
        self._clock = clock
        # Ordered by start; an OrderedDict finds its first entry at once, however many
        # were deleted before it (a dict's iterator would skip their empty slots).
        self._windows: OrderedDict[_Kind, _Window] = OrderedDict()

    def admit(self, event: AuditEvent, known_tool: bool) -> list[AuditEvent]:
        """The events to record now for one refused call (often none)."""
        tool = event.tool if known_tool else "(unknown)"
        kind: _Kind = (event.principal_tenant, event.subject, tool, event.code, event.reason)
        now = self._clock()
        ready = self._close_ended(now)
        window = self._windows.get(kind)
        if window is not None and now - window.started < self.window:
            count = window.pending.count + 1 if window.pending is not None else 1
            window.pending = event.model_copy(
                update={"count": count, "tool": tool} if not known_tool else {"count": count}
            )
            return ready
        ready.extend(self._close(kind))
        self._windows[kind] = _Window(started=now)
        if len(self._windows) > _MAX_KINDS:
            oldest = next(iter(self._windows))
            ready.extend(self._close(oldest))
        return [*ready, event]

    def drain(self) -> list[AuditEvent]:
        """Every pending count, as events to record (the host is closing)."""
        ready = [e for kind in list(self._windows) for e in self._close(kind)]
        self._windows.clear()
        return ready

    def _close_ended(self, now: datetime) -> list[AuditEvent]:
        """Close the windows that ended by ``now``: the counts to record (often none)."""
        ready: list[AuditEvent] = []
        windows = self._windows
        while windows:
            kind, window = next(iter(windows.items()))
            if now - window.started < self.window:
                break  # the oldest still runs, so do the others (a clock set back waits)
            del windows[kind]
            if window.pending is not None:
                ready.append(window.pending)
        return ready

    def _close(self, kind: _Kind) -> list[AuditEvent]:
        window = self._windows.pop(kind, None)
        return [window.pending] if window is not None and window.pending is not None else []
