"""uvicorn's HTTP/1.1 protocol with the two guards uvicorn lacks: a head deadline, a connection cap.

uvicorn (0.54) times out only idle keep-alive connections, and only after a first
response: a connection that sends nothing, or a request head a byte at a time, is held
for as long as the client likes, with its file descriptor. Its ``limit_concurrency``
answers 503, but only once a request head has arrived, so it frees nothing held by slow
heads. These guards live at the protocol level because nothing reaches an ASGI app until
the head is complete:

- a request head must be complete within ``head_timeout`` seconds of the connection
  opening, or of its first byte on a reused connection; otherwise ``408`` and close;
- past ``max_connections`` open connections, a new one is answered ``503`` and closed
  at once, so a flood cannot take the descriptors the store and the log need.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ("guarded_protocol",)


def _plain(status: str, text: str) -> bytes:
    body = text.encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


_REQUEST_TIMEOUT = _plain("408 Request Timeout", "The request head did not arrive in time.\n")
_TOO_MANY = _plain("503 Service Unavailable", "Too many open connections; retry shortly.\n")


class _GuardedH11Protocol(H11Protocol):
    """``H11Protocol`` plus a deadline for each request head and a cap on connections."""

    head_timeout: ClassVar[float] = 10.0
    max_connections: ClassVar[int | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(  # type: ignore[override]  # as H11Protocol's own
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            transport.write(_TOO_MANY)
            transport.close()
            return
        self._watch_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _watch_head(self) -> None:
        """Time the request head while one is awaited; stop once it has arrived."""
        # IDLE: the client has not completed a request head on this cycle. Between
        # requests uvicorn's keep-alive timer runs instead, until the first byte arrives.
        if self.conn.their_state is h11.IDLE:
            idle_between_requests = self.timeout_keep_alive_task is not None
            if self._head_timer is None and not idle_between_requests:
                if not self.transport.is_closing():
                    self._head_timer = self.loop.call_later(self.head_timeout, self._head_late)
        else:
            self._stop_head_timer()

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.write(_REQUEST_TIMEOUT)
            self.transport.close()


def guarded_protocol(*, head_timeout: float, max_connections: int | None) -> type[H11Protocol]:
    """An ``H11Protocol`` class for ``uvicorn.Config(http=...)`` with these guards.

    Raises:
        ValueError: ``head_timeout`` is not a positive, finite number of seconds, or
            ``max_connections`` is below 1.
    """
    if not (math.isfinite(head_timeout) and head_timeout > 0):
        raise ValueError("the head timeout must be a positive, finite number of seconds")
    if max_connections is not None and max_connections < 1:
        raise ValueError("max_connections must be at least 1")

    class GuardedH11Protocol(_GuardedH11Protocol):
        pass

    GuardedH11Protocol.head_timeout = head_timeout
    GuardedH11Protocol.max_connections = max_connections
    return GuardedH11Protocol
