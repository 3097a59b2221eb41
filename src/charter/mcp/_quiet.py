"""A 2026-07-28 request that asks for nothing to be streamed is answered as plain JSON.

At 2026-07-28 a request's notifications are opt-in: progress only with a
``progressToken``, log messages only with the ``io.modelcontextprotocol/logLevel`` key of
its ``_meta``. A request that carries neither can have nothing sent before its answer.
The SDK still serves it, in its streaming mode, as a stream it may need: a task for the
handler, a second one waiting for the client to leave, a memory stream between them and
a timer for keep-alive pings. That costs about two fifths of a whole ``tools/call``'s
CPU time (measured on the SDK's own ``MCPServer``). Its JSON mode answers the same
request in the request's own task.

``QuietRequests`` sends such a request to a second session manager of the same server,
in JSON mode (a public option of the SDK), and keeps the one behaviour that mode drops:
a client that leaves before the answer cancels the call (``ctx.cancel``), as it would
on a stream (noticed once the call has run ``WATCH_AFTER`` seconds, a quarter of one).
What a quiet request does without: the keep-alive pings the streaming mode sends once a
call has been silent for 15 seconds. A client behind a proxy that closes idle
connections sooner than its longest tool runs asks for progress (then the answer
streams); ``quiet_json=False`` (``streamable_http_app``) turns this routing off.

Anything else (the handshake era, a listen stream, a request that asked for progress or
log messages, one whose body this cannot read as a JSON-RPC request, a client that does
not accept a stream) goes to the streaming manager unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping

import jiter
from mcp.server.streamable_http import check_accept_headers
from mcp_types import LOG_LEVEL_META_KEY
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._gate import Replay
from ._sessions import VERSION_HEADER, sessionless

__all__ = ("QuietRequests",)

_STREAMED_KEYS = ("progressToken", LOG_LEVEL_META_KEY)
WATCH_AFTER = 0.25
"""Seconds a quiet call runs before a departed client is looked for (then at once)."""


class QuietRequests:
    """ASGI app: quiet 2026-07-28 requests to ``quiet``, everything else to ``streaming``.

    Sits after ``Body``, so the body is one message, already bounded and checked.
    """

    def __init__(self, streaming: ASGIApp, quiet: ASGIApp) -> None:
        self.streaming = streaming
        self.quiet = quiet

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request through the manager its body asks for."""
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not _modern(scope)
            or not _takes_streams(scope)
        ):
            await self.streaming(scope, receive, send)
            return
        message = await receive()
        if message["type"] != "http.request" or not _asks_nothing_streamed(message):
            await self.streaming(scope, Replay(message, receive), send)
            return
        await _answer_unless_left(self.quiet, scope, message, receive, send)


def _modern(scope: Scope) -> bool:
    """Whether the SDK serves this request as 2026-07-28 (its own header test)."""
    for name, value in scope["headers"]:
        if name == VERSION_HEADER:
            return sessionless(value)
    return False


def _takes_streams(scope: Scope) -> bool:
    """Whether the client accepts an SSE answer, by the SDK's own reading of ``Accept``.

    The streaming mode refuses a client that does not (406); the JSON mode would answer
    it. Such a client goes to the streaming mode, so it is refused as it always was, not
    answered only while its requests happen to be quiet.
    """
    _, takes_streams = check_accept_headers(Request(scope))
    return takes_streams


def _asks_nothing_streamed(message: Message) -> bool:
    """A JSON-RPC request (not a listen) whose ``_meta`` asks for no progress or logs."""
    try:
        decoded = jiter.from_json(message.get("body", b""))
    except ValueError:
        return False
    if not isinstance(decoded, dict) or "id" not in decoded:
        return False
    if decoded.get("method") == "subscriptions/listen":
        return False
    params = decoded.get("params")
    if params is None:
        return True
    if not isinstance(params, Mapping):
        return False
    meta = params.get("_meta")
    if meta is None:
        return True
    return isinstance(meta, Mapping) and not any(key in meta for key in _STREAMED_KEYS)


async def _answer_unless_left(
    app: ASGIApp, scope: Scope, message: Message, receive: Receive, send: Send
) -> None:
    """Run ``app`` on the request; a client that leaves first cancels it, as a stream would.

    Once the call has run ``WATCH_AFTER`` seconds, one read waits for the disconnect (and
    returns at once if the client has already gone). Most calls are answered sooner, so
    they pay for a timer instead of a task and its cancellation (about 18 µs a request,
    measured). A later read by ``app`` shares that read rather than racing it for the
    server's next message.

    uvicorn answers that read with ``http.disconnect`` as soon as the response is complete
    too; its callback runs only after ``app`` has returned (the task that read must run
    first, and nothing between the last ``send`` and the return awaits), when ``running``
    is already False.
    """
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    cancelling = task.cancelling()
    watch: asyncio.Future[Message] | None = None
    running = True
    left = False

    def on_message(read: asyncio.Future[Message]) -> None:
        nonlocal left
        if running and not read.cancelled() and read.exception() is None:
            if read.result()["type"] == "http.disconnect":
                left = True
                task.cancel()

    def watching() -> asyncio.Future[Message]:
        nonlocal watch
        if watch is None:
            watch = asyncio.ensure_future(receive())
            watch.add_done_callback(on_message)
        return watch

    def later_read() -> Awaitable[Message]:
        return asyncio.shield(watching())

    timer = loop.call_later(WATCH_AFTER, watching)
    try:
        await app(scope, Replay(message, later_read), send)
    except asyncio.CancelledError:
        # Our cancel, and no one else's: the client is gone, there is no one to answer.
        if left and task.uncancel() <= cancelling:
            return
        raise
    finally:
        running = False
        timer.cancel()
        if watch is not None:
            watch.cancel()
