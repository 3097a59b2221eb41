"""A request body limit that stops reading at the limit and answers 413 as a problem."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.errors import ErrorCode

from ._problem import http_problem

__all__ = ("BodyLimit",)


class BodyLimit:
    """ASGI middleware: buffer at most ``max_bytes`` of the body, else answer 413.

    A declared ``Content-Length`` over the limit is refused before anything is read; a
    streamed (chunked) body is read chunk by chunk and refused as soon as it passes the
    limit, so memory stays bounded by the limit plus one chunk. The endpoint then reads
    the buffered body as usual.
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
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

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


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the buffered body once, then the client's own messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
