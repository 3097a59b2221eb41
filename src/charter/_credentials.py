"""The caller's credentials from HTTP request headers: one reading for REST and MCP.

A request names its caller with one ``Authorization: Bearer …`` or one ``X-API-Key``
header. Two ``Authorization`` headers, two ``X-API-Key`` headers, or a bearer token and an
API key that differ leave it open who is calling (a proxy that adds a header, a client
that merges two configurations), and taking the first would let the other go unseen.
Such a request is refused as malformed (HTTP 400), before any authenticator runs. A
bearer token and an API key that are the same string are passed on as they are; the
authenticator decides (charter's own refuse both with 401).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .auth import Credentials

__all__ = (
    "AMBIGUOUS_CREDENTIALS_NEXT_STEPS",
    "AMBIGUOUS_CREDENTIALS_REASON",
    "AmbiguousCredentials",
    "check_one_credential",
    "credentials_from_headers",
    "read_credentials",
)

AMBIGUOUS_CREDENTIALS_REASON = "ambiguous_credentials"
"""The ``reason`` of the 400 a transport answers for ``AmbiguousCredentials``."""

AMBIGUOUS_CREDENTIALS_NEXT_STEPS = (
    "Send one credential: a single 'Authorization: Bearer <token>' header or a single "
    "'X-API-Key: <key>' header (check for a proxy or client setting that adds another).",
)
"""What a caller refused for ``AmbiguousCredentials`` can do."""


class AmbiguousCredentials(ValueError):
    """Raised when a request carries more than one credential; the message says which.

    Transports answer it with 400 (``INVALID_INPUT``, reason ``ambiguous_credentials``).
    """


def read_credentials(
    authorization: Sequence[str],
    api_keys: Sequence[str],
    headers: Mapping[str, str] | None = None,
) -> Credentials:
    """The credentials of a request, from every value of its two credential headers.

    Only the ``Bearer`` scheme counts as a token; an ``Authorization`` header with another
    scheme is no bearer token (RFC 6750), but it is still a second one when repeated.

    Args:
        authorization: every ``Authorization`` header value, in order.
        api_keys: every ``X-API-Key`` header value, in order.
        headers: the request headers, for authenticators that need more.

    Returns:
        The bearer token and API key, each None when not sent.

    Raises:
        AmbiguousCredentials: a header is repeated, or a bearer token and an API key differ.
    """
    if len(authorization) > 1:
        raise AmbiguousCredentials(
            f"The request has {len(authorization)} Authorization headers; send exactly one."
        )
    if len(api_keys) > 1:
        raise AmbiguousCredentials(
            f"The request has {len(api_keys)} X-API-Key headers; send exactly one."
        )
    bearer: str | None = None
    if authorization:
        scheme, _, token = authorization[0].strip().partition(" ")
        if scheme.lower() == "bearer":
            bearer = token.strip()
    api_key = api_keys[0] if api_keys else None
    if bearer is not None and api_key is not None and bearer != api_key:
        raise AmbiguousCredentials(
            "The request has a bearer token and a different X-API-Key; send one credential."
        )
    return Credentials(bearer=bearer, api_key=api_key, headers=headers or {})


def credentials_from_headers(
    raw: Sequence[tuple[bytes, bytes]], *, with_headers: bool = False
) -> Credentials:
    """``read_credentials`` over an ASGI scope's raw ``headers`` (lower-case names).

    ``with_headers``: the credentials carry every header too (the first value of a
    repeated one, as Starlette's ``Headers``), for authenticators that need more; REST and
    MCP both ask for them, so the same headers authenticate the same caller on each door.

    Raises:
        AmbiguousCredentials: as ``read_credentials``.
    """
    authorization: list[str] = []
    api_keys: list[str] = []
    for name, value in raw:
        if name == b"authorization":
            authorization.append(value.decode("latin-1"))
        elif name == b"x-api-key":
            api_keys.append(value.decode("latin-1"))
    if not with_headers:
        return read_credentials(authorization, api_keys)
    # Built in reverse, so the first value of a repeated header is the one kept.
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(raw)}
    return read_credentials(authorization, api_keys, headers)


def check_one_credential(raw: Sequence[tuple[bytes, bytes]]) -> None:
    """Refuse ASGI ``headers`` that carry more than one credential, as ``read_credentials``.

    For a transport that leaves reading the credential to another library (the MCP SDK's
    bearer middleware): one header or none is settled by counting, without building the
    ``Credentials``; anything else goes through ``read_credentials``.

    Raises:
        AmbiguousCredentials: as ``read_credentials``.
    """
    seen = 0
    for name, _ in raw:
        if name == b"authorization" or name == b"x-api-key":
            seen += 1
    if seen > 1:
        credentials_from_headers(raw)
