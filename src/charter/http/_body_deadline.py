"""A deadline for reading a request body, and no connection reuse after an unread one."""

from __future__ import annotations

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
    """

    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        """Wrap ``app``; ``seconds`` must be positive and finite."""
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError("the body timeout must be a positive, finite number of seconds")
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        complete = False
        started = False
        with anyio.CancelScope(deadline=anyio.current_time() + self.seconds) as deadline:

            async def read() -> Message:
                nonlocal complete
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    complete = True  # the whole body, or the client left
                    deadline.deadline = math.inf
                return message

            async def answer(message: Message) -> None:
                nonlocal started
                if message["type"] == "http.response.start" and not started:
                    started = True
                    deadline.deadline = math.inf
                    headers = list(message.get("headers", ()))
                    if not complete and not any(name == b"connection" for name, _ in headers):
                        message = {**message, "headers": [*headers, _CLOSE]}
                await send(message)

            await self.app(scope, read, answer)
        if deadline.cancelled_caught and not started:
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


def _has_body(scope: Scope) -> bool:
    """Whether the request announces a body (HTTP/1.1: a length above 0, or chunked)."""
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
    return False
