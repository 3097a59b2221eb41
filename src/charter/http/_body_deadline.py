"""A deadline for reading a request body, and no connection reuse after an unread one."""

from __future__ import annotations

import asyncio
import math

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.errors import ErrorCode

from ._problem import http_problem

__all__ = ("BodyDeadline",)

_CLOSE = (b"connection", b"close")


class BodyDeadline:
    """ASGI middleware: a request's body must arrive within ``seconds`` of its head.

    uvicorn waits for a body as long as the client keeps the connection open, so a client
    that sends a few bytes a minute holds a connection and a task forever. Past the
    deadline, while nothing has been answered yet, the request is cancelled and answered
    ``408`` with ``Connection: close``. The clock stops once the body is complete or the
    app starts its answer without it (a 401 does); such an early answer also carries
    ``Connection: close``, since the unread rest of the body makes the connection
    unusable (and uvicorn would otherwise keep it open for as long as the client trickles).
    Requests without a body are not timed.

    One timer serves every request: a request waiting for its body is noted with its
    deadline, and the timer fires at the earliest one and cancels whoever is still
    waiting. Most bodies arrive with their head, so their note is dropped before any timer
    is due; a timer per request, scheduled and cancelled again, cost each of them more
    than the rest of this middleware.
    """

    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        """Wrap ``app``; ``seconds`` must be positive and finite."""
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError("the body timeout must be a positive, finite number of seconds")
        self.app = app
        self.seconds = seconds
        # The requests still waiting for their body, oldest (soonest due) first: the
        # timeout is one constant, so insertion order is deadline order.
        self._waiting: dict[anyio.CancelScope, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        complete = False
        started = False
        waiting = self._waiting
        with anyio.CancelScope() as watch:
            self._wait(watch)

            async def read() -> Message:
                nonlocal complete
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    complete = True  # the whole body, or the client left
                    waiting.pop(watch, None)
                return message

            async def answer(message: Message) -> None:
                nonlocal started
                if message["type"] == "http.response.start" and not started:
                    started = True
                    waiting.pop(watch, None)
                    headers = list(message.get("headers", ()))
                    if not complete and not any(name == b"connection" for name, _ in headers):
                        message = {**message, "headers": [*headers, _CLOSE]}
                await send(message)

            try:
                await self.app(scope, read, answer)
            finally:
                waiting.pop(watch, None)
        if watch.cancelled_caught and not started:
            response = http_problem(
                408,
                "Request timeout",
                f"The request body did not arrive within {self.seconds:g} seconds.",
                code=ErrorCode.TIMEOUT,
                reason="body_timeout",
                headers={"Connection": "close"},
                retryable=True,
            )
            await response(scope, receive, send)

    def _wait(self, watch: anyio.CancelScope) -> None:
        """Note a request waiting for its body; make sure the timer will come for it."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # served by another event loop than before
            self._loop, self._timer = loop, None
            self._waiting.clear()
        due = loop.time() + self.seconds
        self._waiting[watch] = due
        if self._timer is None:
            self._timer = loop.call_at(due, self._expire)

    def _expire(self) -> None:
        """Cancel the requests whose body is overdue; set the timer for the next one."""
        assert self._loop is not None
        self._timer = None
        now = self._loop.time()
        while self._waiting:
            watch, due = next(iter(self._waiting.items()))
            if due > now:
                self._timer = self._loop.call_at(due, self._expire)
                return
            del self._waiting[watch]
            watch.cancel()


def _has_body(scope: Scope) -> bool:
    """Whether the request announces a body (HTTP/1.1: a length above 0, or chunked)."""
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
    return False
