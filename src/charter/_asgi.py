"""What every HTTP transport refuses before a request reaches it: one policy, one place.

REST (``charter.http``) and MCP over streamable HTTP (``charter.mcp``) are both wrapped in
these ASGI middlewares, so hostile input gets the same answer whichever door it takes:

- ``HostCheck``: a ``Host`` header outside the allowed ones (DNS-rebinding protection) is
  421, before anything else runs; given ``allowed_origins``, a present ``Origin`` outside
  them (a page on another site: cross-site request forgery) is 403 just after.
- ``BodyLimit``: a body over the limit (by default ``PayloadLimits.max_bytes``, 1 MiB) is
  413, refused by its declared length or as soon as the streamed body passes it.
- Duplicate JSON object keys: REST hands the raw body to the host, whose parser refuses
  them (``charter._limits.parse_json``); MCP checks the raw JSON-RPC body with the same
  rule (``charter._limits.check_unique_keys``) before the SDK parses it.

Refusals are RFC 9457 problems (``application/problem+json``) with charter's ``code``,
``reason`` and ``next_steps``, as REST renders every error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import DEFAULT_NEXT_STEPS, ErrorCode

__all__ = (
    "DEFAULT_ALLOWED_HOSTS",
    "BodyLimit",
    "Bounded",
    "HostCheck",
    "content_length",
    "default_origins",
    "host_allowed",
    "problem",
    "too_large",
)

DEFAULT_ALLOWED_HOSTS: tuple[str, ...] = (
    "127.0.0.1:*",
    "localhost:*",
    "[::1]:*",
    "127.0.0.1",
    "localhost",
    "[::1]",
)
"""Host headers accepted by default: loopback only (DNS-rebinding protection)."""


async def problem(
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    status: int,
    title: str,
    detail: str,
    reason: str,
    next_steps: Sequence[str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Answer with an ``INVALID_INPUT`` problem (the shape of ``charter.http``'s problems).

    ``next_steps`` default to the code's.
    """
    if next_steps is None:
        next_steps = DEFAULT_NEXT_STEPS[ErrorCode.INVALID_INPUT]
    body = json.dumps(
        {
            "type": f"urn:charter:error:{ErrorCode.INVALID_INPUT.value}",
            "title": title,
            "status": status,
            "detail": detail,
            "code": ErrorCode.INVALID_INPUT.value,
            "reason": reason,
            "next_steps": list(next_steps),
            "retryable": False,
        },
        separators=(",", ":"),
    ).encode()
    raw_headers = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
        *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def default_origins(hosts: Sequence[str]) -> list[str]:
    """The ``Origin`` values allowed by default: ``http://`` and ``https://`` forms of ``hosts``.

    A page served by the app itself (the console) sends one of them, since its ``Host`` is
    allowed; ``name:*`` stays a pattern (``http://127.0.0.1:*``), as for hosts. MCP's own
    default (``charter.mcp.streamable_http_app``) is the same list.
    """
    return [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether a ``Host`` header value is one of ``allowed`` (``name:*``: any port).

    The rule of the MCP SDK's DNS-rebinding protection, which MCP also applies; ``Origin``
    values are matched by it too (``http://127.0.0.1:*``).
    """
    if host in allowed:
        return True
    for pattern in allowed:
        if pattern.endswith(":*") and host.startswith(pattern[:-1]):
            port = host[len(pattern) - 1 :]
            if port.isdigit():
                return True
    return False


class HostCheck:
    """ASGI middleware: a request whose ``Host`` header is not allowed is 421.

    Why: a page on another site can point a name it controls at 127.0.0.1 (DNS
    rebinding) and have the victim's browser call a local server; the ``Host`` header
    still carries the attacker's name.

    Given ``allowed_origins``, a request whose ``Origin`` header is present and not one
    of them is 403. Why: a page on another site can make its visitor's browser send a
    POST without asking first (a CORS "simple" request: no custom header, a ``text/plain``
    body) to a server on 127.0.0.1; the browser then names the page's origin. A request
    without ``Origin`` (a client that is not a browser, a same-origin ``GET``) passes.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Sequence[str],
        exempt: Sequence[str] = (),
        allowed_origins: Sequence[str] | None = None,
    ) -> None:
        """Wrap ``app``, accepting only ``allowed_hosts`` (see ``host_allowed``).

        ``exempt`` paths answer any ``Host`` and ``Origin``: probes (``/healthz``) that an
        orchestrator sends to the replica's own address, and that tell a page nothing.
        ``allowed_origins`` (matched as hosts are, ``name:*`` allowing any port): the
        ``Origin`` values accepted; None checks no ``Origin``.
        """
        self.app = app
        self.allowed_hosts = tuple(allowed_hosts)
        self.allowed_origins = None if allowed_origins is None else tuple(allowed_origins)
        self.exempt = frozenset(exempt)
        # Host and Origin values already found allowed, as sent: a server hears the same
        # few names on every request. Bounded, since ``name:*`` allows every port.
        self._allowed_seen: set[bytes] = set()
        self._origins_seen: set[bytes] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        raw: bytes | None = None
        origin: bytes | None = None
        origins = 0
        for name, value in scope.get("headers", ()):
            if name == b"host":
                if raw is not None:  # two Host headers: refused
                    raw = None
                    break
                raw = value
            elif name == b"origin":
                origin = value
                origins += 1
        if raw is None or not _allowed(raw, self.allowed_hosts, self._allowed_seen):
            await problem(
                scope,
                receive,
                send,
                status=421,
                title="Misdirected request",
                detail="The Host header is not one this server answers to.",
                reason="host_not_allowed",
                next_steps=(
                    "Call the server by a name it serves; its operator lists them "
                    "(charter serve --allow-host, create_app(allowed_hosts=...)).",
                ),
            )
            return
        if (
            origin is None
            or self.allowed_origins is None
            or (origins == 1 and _allowed(origin, self.allowed_origins, self._origins_seen))
        ):
            await self.app(scope, receive, send)
            return
        await problem(
            scope,
            receive,
            send,
            status=403,
            title="Origin not allowed",
            detail="The request comes from a web page whose origin this server does not "
            "accept (the Origin header).",
            reason="origin_not_allowed",
            next_steps=(
                "Call from a page the server accepts, or from a client that is not a "
                "browser; its operator lists the origins "
                "(create_app(allowed_origins=..., cors_origins=...)).",
            ),
        )


_ALLOWED_SEEN_MAX = 64
"""Most allowed ``Host`` (and, apart, ``Origin``) values a ``HostCheck`` remembers."""


def _allowed(raw: bytes, allowed: Sequence[str], seen: set[bytes]) -> bool:
    """Whether a header value is one of ``allowed`` (``host_allowed``), remembered in ``seen``."""
    if raw in seen:
        return True
    if not host_allowed(raw.decode("latin-1"), allowed):
        return False
    if len(seen) < _ALLOWED_SEEN_MAX:
        seen.add(raw)
    return True


class Bounded:
    """Base of the ASGI middlewares that bound a request body: the app and its limit."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        """Wrap ``app``; ``max_bytes`` must be positive."""
        if max_bytes < 1:
            raise ValueError("max_body_bytes must be a positive number of bytes")
        self.app = app
        self.max_bytes = max_bytes

    async def settled_at_head(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Whether the request is already dealt with from its head alone; if so, it is.

        A scope other than HTTP goes to the app untouched; a request declaring a
        ``Content-Length`` over the limit is answered 413.
        """
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return True
        declared = content_length(scope["headers"])
        if declared is None or declared <= self.max_bytes:
            return False
        await too_large(scope, receive, send, self.max_bytes)
        return True


class BodyLimit(Bounded):
    """ASGI middleware: let the endpoint read at most ``max_bytes`` of the body, else 413.

    A declared ``Content-Length`` over the limit is refused before anything is read. The
    body is otherwise read only when the endpoint asks for it, after it authenticated the
    caller, so an unauthenticated request is answered without waiting for its body; a
    streamed (chunked) body is refused as soon as it passes the limit, so memory stays
    bounded by the limit plus one chunk.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await self.settled_at_head(scope, receive, send):
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
            await too_large(scope, receive, send, self.max_bytes)
        except BaseExceptionGroup as group:
            # The MCP SDK reads the body inside a task group, which wraps the signal.
            rest = group.subgroup(lambda exc: not isinstance(exc, _TooLarge))
            if rest is not None or started:
                raise
            await too_large(scope, receive, send, self.max_bytes)


async def too_large(scope: Scope, receive: Receive, send: Send, max_bytes: int) -> None:
    """Answer the 413 problem for a body over ``max_bytes``, closing the connection."""
    await problem(
        scope,
        receive,
        send,
        status=413,
        title="Content too large",
        detail=f"The request body is larger than {max_bytes} bytes.",
        reason="input_too_large",
        # The rest of the body is not read; the connection cannot be reused.
        headers={"Connection": "close"},
    )


class _TooLarge(Exception):
    """Raised into the endpoint when the body it reads passes the limit."""


def content_length(headers: Sequence[tuple[bytes, bytes]]) -> int | None:
    """The declared ``Content-Length`` of ASGI ``headers``; None when absent or not a number."""
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
