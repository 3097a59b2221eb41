"""Reading the wire request: credentials, the caller, and controls sent as headers."""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope

from charter._credentials import (
    AMBIGUOUS_CREDENTIALS_NEXT_STEPS,
    AMBIGUOUS_CREDENTIALS_REASON,
    AmbiguousCredentials,
    credentials_from_headers,
)
from charter.auth import AuthenticationFailed, AuthenticationUnavailable, Credentials, Principal
from charter.errors import ErrorCode
from charter.host import Host
from charter.policy import InvocationControls

from ._problem import http_problem, invalid_input

__all__ = (
    "CONTROL_HEADERS",
    "authenticate",
    "authentication_required",
    "authentication_unavailable",
    "controls_from_headers",
    "credentials_from",
    "read_body",
)

CONTROL_HEADERS = {
    "requestId": "Idempotency-Key",
    "confirmed": "Charter-Confirm",
    "approvalId": "Charter-Approval",
}
"""The header that carries each ``_charter`` control."""

_HEADER_NAMES = {name.lower().encode(): name for name in CONTROL_HEADERS.values()}
"""Each control header's name as ASGI spells it (lower case), to its display name."""

_CONTROL_HEADER_NAMES = frozenset(_HEADER_NAMES)


def credentials_from(scope: Scope) -> Credentials:
    """The bearer token and API key the request (its ASGI ``scope``) carries.

    Only the ``Bearer`` scheme counts; a request with another scheme (or none) is treated
    as carrying no token, as RFC 6750 asks for unsupported methods.

    Raises:
        AmbiguousCredentials: two ``Authorization`` or two ``X-API-Key`` headers, or a
            bearer token and an API key that differ (``charter._credentials``).
    """
    return credentials_from_headers(scope["headers"], with_headers=True)


async def authenticate(host: Host, scope: Scope) -> Principal | Response | None:
    """The caller of a request (its ASGI ``scope``; None when anonymous), or the 400/401/503."""
    try:
        credentials = credentials_from(scope)
    except AmbiguousCredentials as exc:
        return http_problem(
            400,
            "Malformed request",
            str(exc),
            code=ErrorCode.INVALID_INPUT,
            reason=AMBIGUOUS_CREDENTIALS_REASON,
            next_steps=AMBIGUOUS_CREDENTIALS_NEXT_STEPS,
        )
    if credentials.bearer == "" or credentials.api_key == "":
        return _invalid_token("The credentials are empty.")
    try:
        return await host.authenticate(credentials)
    except AuthenticationFailed as exc:
        return _invalid_token(str(exc) or "The credentials are not valid.")
    except AuthenticationUnavailable as exc:
        return authentication_unavailable(exc)


def authentication_unavailable(exc: AuthenticationUnavailable) -> Response:
    """The 503 for credentials that could not be checked now: retry, nothing ran."""
    return http_problem(
        503,
        "Service unavailable",
        str(exc),
        code=ErrorCode.PROVIDER_UNAVAILABLE,
        reason=exc.reason,
        headers={"Retry-After": "1"},
        retryable=True,
    )


def authentication_required() -> Response:
    """The 401 of a route that needs credentials, called without any."""
    return http_problem(
        401,
        "Authentication required",
        "This endpoint needs credentials: send 'Authorization: Bearer <token>' or "
        "'X-API-Key: <key>'.",
        code=ErrorCode.UNAUTHENTICATED,
        reason="authentication_required",
        headers={"WWW-Authenticate": "Bearer"},
    )


def _invalid_token(detail: str) -> Response:
    return http_problem(
        401,
        "Authentication required",
        detail,
        code=ErrorCode.UNAUTHENTICATED,
        reason="invalid_token",
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )


def controls_from_headers(scope: Scope) -> InvocationControls | Response | None:
    """The controls sent as headers (None when none were), or the 400 for a malformed one.

    ``Idempotency-Key`` may be a bare UUID or an RFC 8941 string (``"<uuid>"``).
    ``Charter-Confirm`` is ``true`` or ``false``; ``false`` is the same as not sending it.
    A control header sent more than once is malformed, whatever its values: taking the
    first would let the other go unseen (two keys, ``true`` and ``false``), as for two
    credentials (``charter._credentials``).
    """
    sent: dict[bytes, str] = {}
    # One pass over the raw headers; most calls send none of the three.
    for raw_name, raw_value in scope["headers"]:
        if raw_name in _CONTROL_HEADER_NAMES:
            if raw_name in sent:
                return _bad_header(_HEADER_NAMES[raw_name], "it was sent more than once")
            sent[raw_name] = raw_value.decode("latin-1")
    if not sent:
        return None
    raw: dict[str, object] = {}
    key = sent.get(b"idempotency-key")
    if key is not None:
        key = key.strip()
        if len(key) >= 2 and key[0] == key[-1] == '"':
            key = key[1:-1]
        raw["requestId"] = key
    confirm = sent.get(b"charter-confirm")
    if confirm is not None:
        value = confirm.strip().lower()
        if value not in ("true", "false"):
            return _bad_header("Charter-Confirm", "must be 'true' or 'false'")
        if value == "true":
            raw["confirmed"] = True
    approval = sent.get(b"charter-approval")
    if approval is not None:
        raw["approvalId"] = approval
    if not raw:
        return None
    try:
        return InvocationControls.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False, include_context=False)[0]
        control = str(first["loc"][0]) if first["loc"] else "requestId"
        header = CONTROL_HEADERS.get(control, control)
        return _bad_header(header, first["msg"])


def _bad_header(header: str, message: str) -> Response:
    return invalid_input(
        f"The {header} header is malformed: {message}.", "invalid_header", header=header
    )


async def read_body(receive: Receive, max_bytes: int) -> bytes | None:
    """The request's whole body, read from ``receive``; None once it passes ``max_bytes``.

    For the call route, which reads the body itself (no ``Request``, no async generator,
    no middleware counting it): at most ``max_bytes`` plus one chunk is held. The rest of
    a body over the limit is left unread.

    Raises:
        ClientDisconnect: the client went away before the body was complete.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > max_bytes:
                return None
            if not message.get("more_body", False):
                if not chunks:
                    return chunk
                chunks.append(chunk)
                return b"".join(chunks)
            chunks.append(chunk)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()
