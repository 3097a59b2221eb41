"""A request body limit that stops reading at the limit and answers 413 as a problem."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.errors import ErrorCode

from ._problem import http_problem

__all__ = ("BodyLimit",)


class BodyLimit:
    """ASGI middleware: let the endpoint read at most ``max_bytes`` of the body, else 413.

    A declared ``Content-Length`` over the limit is refused before anything is read. The
    body is otherwise read only when the endpoint asks for it, after it authenticated the
    caller, so an unauthenticated request is answered without waiting for its body; a
    streamed (chunked) body is refused as soon as it passes the limit, so memory stays
    bounded by the limit plus one chunk.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        """Wrap ``app``; ``max_bytes`` must be positive."""
        if max_bytes < 1:
            raise ValueError("max_body_bytes must be a positive number of bytes")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        size = 0
        started = False

        async def counted() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > self.max_bytes:
                    raise _TooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if started:  # pragma: no cover - endpoints read the body before answering
                raise
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = http_problem(
            413,
            "Content too large",
            f"The request body is larger than {self.max_bytes} bytes.",
            code=ErrorCode.INVALID_INPUT,
            reason="input_too_large",
            # The rest of the body is not read; the connection cannot be reused.
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


class _TooLarge(Exception):
    """Raised into the endpoint when the body it reads passes the limit."""


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
