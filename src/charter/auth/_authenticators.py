"""Authenticators: the credentials a transport received, the protocol, and a static table."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from ._errors import AuthenticationFailed
from ._principal import Principal

__all__ = ("Authenticator", "Credentials", "StaticAuthenticator", "presented_token")


_NO_HEADERS: Mapping[str, str] = MappingProxyType({})
"""The headers of credentials built without any: read-only and empty, so one serves all."""


def _empty_headers() -> Mapping[str, str]:
    return _NO_HEADERS


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Credentials:
    """What the transport received to authenticate the caller; secrets stay out of its repr."""

    bearer: str | None = None
    """The bearer token, without the ``Bearer`` prefix; None when none was sent."""

    api_key: str | None = None
    """The API key; None when none was sent."""

    headers: Mapping[str, str] = field(default_factory=_empty_headers, hash=False)
    """Request headers as the transport received them, for authenticators that need more;
    copied into a read-only mapping and left out of the hash."""

    def __post_init__(self) -> None:
        # The shared empty mapping needs no copy (the transports' usual case: a token alone).
        if self.headers is not _NO_HEADERS:
            object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    def __repr__(self) -> str:
        bearer = None if self.bearer is None else "<redacted>"
        api_key = None if self.api_key is None else "<redacted>"
        return f"Credentials(bearer={bearer}, api_key={api_key}, headers=<{len(self.headers)}>)"


@runtime_checkable
class Authenticator(Protocol):
    """Protocol: turns transport credentials into a principal."""

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        """Authenticate the caller.

        Args:
            credentials: What the transport received.

        Returns:
            The principal, or None when no credentials were sent (an anonymous caller).

        Raises:
            AuthenticationFailed: If credentials were sent but are not valid.
        """
        ...


def presented_token(credentials: Credentials) -> str | None:
    """The one token the caller sent, as a bearer token or as an API key.

    Charter's authenticators accept one credential per request; each reads it through
    this function, so they refuse two the same way.

    Args:
        credentials: What the transport received.

    Returns:
        The bearer token or the API key, whichever was sent; None when neither was.

    Raises:
        AuthenticationFailed: Both a bearer token and an API key were sent.
    """
    bearer, api_key = credentials.bearer, credentials.api_key
    if bearer is None:
        return api_key
    if api_key is not None:
        raise AuthenticationFailed("send either a bearer token or an API key, not both")
    return bearer


def _digest(token: str) -> bytes:
    # Hashing first gives compare_digest equal-length inputs (no length leak) and
    # accepts any str, where compare_digest on str rejects non-ASCII.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class StaticAuthenticator:
    """An ``Authenticator`` over a fixed table of tokens, for tests, examples and stdio.

    A token is accepted as a bearer token or as an API key. Lookup compares the presented
    token with every entry in constant time, whatever the position of the match.
    """

    __slots__ = ("_table",)

    def __init__(self, tokens: Mapping[str, Principal]) -> None:
        """Build the authenticator.

        Args:
            tokens: Each accepted token and the principal it authenticates.

        Raises:
            ValueError: If a token is empty.
            TypeError: If a token is not a str or a value is not a ``Principal``.
        """
        table: list[tuple[bytes, Principal]] = []
        for token, principal in tokens.items():
            if not isinstance(token, str):
                raise TypeError("StaticAuthenticator tokens must be str")
            if not token:
                raise ValueError("StaticAuthenticator tokens must not be empty")
            if not isinstance(principal, Principal):
                raise TypeError("StaticAuthenticator maps each token to a Principal")
            table.append((_digest(token), principal))
        self._table = tuple(table)

    def __repr__(self) -> str:
        return f"StaticAuthenticator(<{len(self._table)} tokens>)"

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        """Look the presented bearer token or API key up in the table.

        Args:
            credentials: What the transport received.

        Returns:
            The token's principal, or None when neither a bearer token nor an API key was
            sent.

        Raises:
            AuthenticationFailed: If the token is unknown, or both a bearer token and an API
                key were sent.
        """
        token = presented_token(credentials)
        if token is None:
            return None
        digest = _digest(token)
        found: Principal | None = None
        for candidate, principal in self._table:
            # No early exit: every entry is compared, so timing does not reveal the match.
            if hmac.compare_digest(candidate, digest) and found is None:
                found = principal
        if found is None:
            raise AuthenticationFailed("the credentials are not valid")
        return found
