"""What MCP over HTTP refuses around the SDK's bearer check: two ASGI layers, not six.

``Admission`` runs before the bearer check: a declared body over the limit is 413, two
credentials are 400 (``charter._credentials``), and a key store that cannot be reached
while the token is checked is 503. ``Body`` runs after it, so that a caller refused there
is answered without its body being read (as on REST): it reads the body once, bounded
(413 as soon as it passes the limit), reads it as JSON (``read_message``, which reads
each stdio line too: ``charter.mcp.stdio``), refuses a
JSON-RPC body in which an object repeats a key (400, ``charter._limits.check_unique_keys``'s
rule, found by jiter first) or that the parsers cannot take for its size or depth (413 or
422, as REST), and a request whose ``id`` is neither a string nor an integer (400,
JSON-RPC ``-32600``), and hands the SDK the body it read.

The refusals are those of ``charter._asgi`` and REST (``application/problem+json``). Each
is one layer because every layer costs every request a coroutine frame and the
closures it wraps ``receive`` or ``send`` in; one check each, in the same order as
before, is the same policy for less.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Final

import jiter
from mcp.types import INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._asgi import Bounded, problem, too_large
from .._credentials import (
    AMBIGUOUS_CREDENTIALS_NEXT_STEPS,
    AMBIGUOUS_CREDENTIALS_REASON,
    AmbiguousCredentials,
    check_one_credential,
)
from .._limits import PayloadLimits, PayloadRejected, parse_json
from ..auth import AuthenticationUnavailable

__all__ = (
    "REFUSED_STATUS",
    "UNREADABLE",
    "Admission",
    "Body",
    "Replay",
    "has_invalid_id",
    "invalid_id_error",
    "read_message",
)

UNREADABLE: Final = object()
"""What ``read_message`` returns for text that is not JSON charter reads (the SDK answers it)."""

REFUSED_STATUS: Mapping[str, tuple[int, str]] = {
    # As REST answers the same reasons (charter.http._problem: INVALID_INPUT is 422).
    "duplicate_key": (400, "Malformed request"),
    "input_too_large": (413, "Content too large"),
    "input_too_deep": (422, "Invalid input"),
    "input_too_wide": (422, "Invalid input"),
}
"""The ``PayloadRejected`` reasons ``read_message`` raises, and their HTTP status and title."""

INVALID_ID_MESSAGE = "Invalid Request: a request's id must be a string or an integer"


class Admission(Bounded):
    """ASGI middleware before the bearer check: the declared size, one credential, a 503.

    - A declared ``Content-Length`` over ``max_bytes`` is 413 before anything else.
    - Two credentials are a 400 before anything reads one: the SDK's bearer backend takes
      the first ``Authorization`` header, so two of them, two ``X-API-Key`` headers, or a
      bearer token and a different API key are refused as REST refuses them.
    - ``host.authenticate`` raises ``AuthenticationUnavailable`` when the key store (or the
      JWT issuer's keys) cannot be reached; that happens before the MCP app runs, so no
      response has started and nothing ran: 503 with ``Retry-After``, in the OAuth error
      format the SDK's 401s use.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await self.settled_at_head(scope, receive, send):
            return
        try:
            check_one_credential(scope["headers"])
        except AmbiguousCredentials as exc:
            await _malformed(
                scope,
                receive,
                send,
                str(exc),
                AMBIGUOUS_CREDENTIALS_REASON,
                next_steps=AMBIGUOUS_CREDENTIALS_NEXT_STEPS,
            )
            return
        try:
            await self.app(scope, receive, send)
        except AuthenticationUnavailable as exc:
            response = JSONResponse(
                {"error": "temporarily_unavailable", "error_description": str(exc)},
                status_code=503,
                headers={"Retry-After": "1"},
            )
            await response(scope, receive, send)


class Body(Bounded):
    """ASGI middleware after the bearer check: the body read once, bounded, its keys unique.

    The SDK reads every request's body whole before it looks at it, so reading it here
    first costs nothing more; it then gets the body this read, as one message. A streamed
    (chunked) body is refused as soon as it passes ``max_bytes``, so memory stays bounded
    by the limit plus one chunk; the rest is not read, so the answer closes the
    connection. The SDK's parser keeps the last of two equal keys, REST's (the host's)
    refuses them: a ``POST`` body that repeats a key is 400 before the SDK parses it. A
    body the parsers cannot take for its size or depth (an integer of more digits than
    ``limits`` allow, nesting past what jiter reads) is the 413 or 422 problem REST gives,
    not the SDK's bare parse error; and a request (it has a ``method``) whose ``id`` is
    ``null``, a number with a fraction, a boolean, an object or an array is a JSON-RPC
    ``-32600`` with HTTP 400 in every protocol era, where the SDK would take a
    handshake-era one for a notification (202, never answered).
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, limits: PayloadLimits) -> None:
        """Wrap ``app``; bodies over ``max_bytes`` are 413, and JSON is read under ``limits``."""
        super().__init__(app, max_bytes=max_bytes)
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        message = await receive()
        if message["type"] == "http.request" and message.get("more_body", False):
            whole = await self._rest_of(message, receive)
            if whole is None:
                await too_large(scope, receive, send, self.max_bytes)
                return
            message = whole
        if message["type"] == "http.request":
            body: bytes = message.get("body", b"")
            if len(body) > self.max_bytes:
                await too_large(scope, receive, send, self.max_bytes)
                return
            if scope["method"] == "POST":
                try:
                    parsed = read_message(body, self.limits)
                except PayloadRejected as exc:
                    status, title = REFUSED_STATUS[exc.reason]
                    await problem(
                        scope,
                        receive,
                        send,
                        status=status,
                        title=title,
                        detail=f"The request body was rejected: {exc}.",
                        reason=exc.reason,
                    )
                    return
                if has_invalid_id(parsed):
                    await _INVALID_ID(scope, receive, send)
                    return
        await self.app(scope, Replay(message, receive), send)

    async def _rest_of(self, first: Message, receive: Receive) -> Message | None:
        """The whole body as one message, or None once it passes the limit.

        A message other than a body part (the client left) ends the body as it is; the
        SDK then sees the disconnect on its next read.
        """
        chunks = [first.get("body", b"")]
        size = len(chunks[0])
        while True:
            if size > self.max_bytes:
                return None
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk: bytes = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            if not message.get("more_body", False):
                break
        if size > self.max_bytes:
            return None
        return {"type": "http.request", "body": b"".join(chunks), "more_body": False}


class Replay:
    """A ``receive`` that returns ``first`` once, then what ``receive`` returns.

    Not a coroutine function: a later read is the server's own ``receive()``, handed over
    without a frame of ours around it. The SDK keeps one read waiting for a disconnect
    while it answers and cancels it at the end; a frame of ours in that read would be one
    more object in the garbage cycle the cancellation leaves behind.
    """

    __slots__ = ("_first", "_receive")

    def __init__(self, first: Message, receive: Receive) -> None:
        self._first: Message | None = first
        self._receive = receive

    def __call__(self) -> Awaitable[Message]:
        first = self._first
        if first is None:
            return self._receive()
        self._first = None
        return _given(first)


async def _given(message: Message) -> Message:
    return message


def read_message(body: bytes, limits: PayloadLimits) -> object:
    """A JSON-RPC message as parsed, refused when it repeats a key or breaks ``limits``.

    jiter (the parser pydantic, and so the SDK, reads JSON with) finds a repeated key in C,
    for about 20,000 instructions a JSON-RPC call where the standard library's parser with
    a Python hook per object costs 48,000 (callgrind). It compares keys as decoded, as
    the standard library does. Whatever it does not pass (a repeated key, text it refuses:
    not JSON, a lone surrogate, an integer past its range, nesting past its depth) goes to
    ``charter._limits.parse_json`` with ``limits``, REST's reader, which says why: a
    repeated key, or a size or depth past the limits (``REFUSED_STATUS``'s reasons), is
    raised; anything else is ``UNREADABLE``, for the SDK to answer in its own words.

    Raises:
        PayloadRejected: with one of ``REFUSED_STATUS``'s reasons.
    """
    try:
        return jiter.from_json(body, catch_duplicate_keys=True)
    except ValueError:
        pass
    try:
        return parse_json(body, limits)
    except PayloadRejected as exc:
        if exc.reason in REFUSED_STATUS:
            raise
        return UNREADABLE


def has_invalid_id(message: object) -> bool:
    """Whether ``message`` is a request (it has a ``method``) whose ``id`` is not valid.

    A request's id is a string or an integer (MCP: never null); a message without an
    ``id`` is a notification, and one without a ``method`` a response.
    """
    if type(message) is not dict or "method" not in message or "id" not in message:
        return False
    request_id = message["id"]
    return not (type(request_id) is str or type(request_id) is int)


def invalid_id_error() -> JSONRPCError:
    """The JSON-RPC error for a request with an invalid id (it cannot be echoed: null)."""
    return JSONRPCError(
        jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=INVALID_ID_MESSAGE)
    )


_INVALID_ID = Response(
    invalid_id_error().model_dump_json(by_alias=True, exclude_unset=True),
    status_code=400,
    media_type="application/json",
)
"""The answer to such a request over HTTP: the SDK's shape for an invalid request."""


async def _malformed(
    scope: Scope,
    receive: Receive,
    send: Send,
    detail: str,
    reason: str,
    *,
    next_steps: Sequence[str] | None = None,
) -> None:
    """The 400 problem for a request refused before the SDK sees it."""
    await problem(
        scope,
        receive,
        send,
        status=400,
        title="Malformed request",
        detail=detail,
        reason=reason,
        next_steps=next_steps,
    )
