"""The SDK's ``TokenVerifier`` hook and bearer backend, backed by the host's ``Authenticator``.

The backend reads a request's credentials as REST does (``charter._credentials``): an
``Authorization: Bearer`` token or an ``X-API-Key``, so the same headers authenticate the
same caller on both doors; the SDK's bearer middleware, which answers 401 with its
``WWW-Authenticate`` challenge, stays the one in front of MCP.
"""

from __future__ import annotations

import functools
from typing import Any

from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict
from starlette.authentication import AuthCredentials
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from .._credentials import AmbiguousCredentials, credentials_from_headers
from ..auth import AuthenticationFailed, Credentials, Principal, principal_key
from ..host import Host

__all__ = (
    "HostBearerBackend",
    "HostTokenVerifier",
    "PrincipalAccessToken",
    "RefuseBadCredentials",
    "principal_from_scope",
    "request_credentials",
)


class PrincipalAccessToken(AccessToken):
    """An SDK access token that carries the charter principal it was verified as."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    principal: Principal


class HostTokenVerifier:
    """A ``TokenVerifier`` that asks ``host.authenticate(Credentials(bearer=token))``.

    Any charter ``Authenticator`` works (API keys, a JWT verifier, a static table); the
    SDK's bearer middleware then answers a missing or rejected token with its 401
    ``WWW-Authenticate`` challenge.
    """

    def __init__(self, host: Host) -> None:
        """Verify tokens with ``host``'s authenticator."""
        self._host = host

    async def verify_token(self, token: str) -> AccessToken | None:
        """Return the token's principal as an access token, or None when it is not valid."""
        principal = await self.principal(token)
        return None if principal is None else _access_token(principal)

    async def principal(self, token: str) -> Principal | None:
        """The principal ``token`` authenticates, or None when it is not valid."""
        return await self.authenticate(Credentials(bearer=token))

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        """The principal ``credentials`` authenticate, or None when they are not valid."""
        try:
            return await self._host.authenticate(credentials)
        except AuthenticationFailed:
            return None


class HostBearerBackend(BearerAuthBackend):
    """The SDK's ``BearerAuthBackend`` slot, reading credentials as REST reads them.

    A request's credentials are ``request_credentials``: a bearer token or an API key,
    read by ``charter._credentials.read_credentials`` as REST reads them; none, empty
    ones, or refused ones: anonymous, so ``RequireAuthMiddleware`` answers 401 with the
    SDK's challenge, and the SDK's middleware does the rest. The headers are read from
    the ASGI scope without building Starlette's ``Headers``, and the access token,
    credentials and user it hands the SDK are built once per principal. A charter
    access token never expires on its own and names no resource (the host's
    authenticator decided both), so the SDK's checks of those pass by construction.
    """

    def __init__(self, verifier: HostTokenVerifier) -> None:
        """Authenticate bearer tokens with ``verifier``."""
        super().__init__(verifier)
        self._verifier = verifier

    async def authenticate(
        self, conn: HTTPConnection
    ) -> tuple[AuthCredentials, AuthenticatedUser] | None:
        """The request's credentials and user, or None when it carries no valid token."""
        credentials = request_credentials(conn.scope)
        if credentials is None:
            return None
        principal = await self._verifier.authenticate(credentials)
        return None if principal is None else _authenticated(principal)


class RefuseBadCredentials:
    """Where anonymous callers are let in (``require_auth=False``): refused credentials are not.

    A request with no credentials goes on as anonymous; one whose credentials the host
    refused (a revoked key, a mistyped token) gets the SDK's 401 challenge, as REST
    answers it, instead of being served as anonymous. Sits inside the bearer middleware.
    """

    def __init__(self, app: ASGIApp, challenge: RequireAuthMiddleware) -> None:
        """Serve ``app``; answer refused credentials with ``challenge`` (its 401)."""
        self.app = app
        self.challenge = challenge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request."""
        if isinstance(scope.get("user"), AuthenticatedUser) or not _sent_credentials(scope):
            await self.app(scope, receive, send)
        else:
            await self.challenge(scope, receive, send)


def _sent_credentials(scope: Scope) -> bool:
    """Whether a request sent a bearer token or an API key, even an empty one."""
    try:
        credentials = credentials_from_headers(scope["headers"])
    except AmbiguousCredentials:
        return True
    return credentials.bearer is not None or credentials.api_key is not None


def request_credentials(scope: Any) -> Credentials | None:
    """The credentials an ASGI scope's request sent, read as REST reads them.

    ``charter._credentials.read_credentials`` over the raw headers (one pass, the first
    value of each header kept for authenticators that need more): an ``Authorization``
    header's ``Bearer`` token, stripped, and an ``X-API-Key``. None when there is neither,
    when one is empty (REST refuses those too), or when they are ambiguous (the
    ``Admission`` layer has answered such a request 400 before this runs).
    """
    try:
        credentials = credentials_from_headers(scope["headers"], with_headers=True)
    except AmbiguousCredentials:
        return None
    if credentials.bearer is None and credentials.api_key is None:
        return None
    if credentials.bearer == "" or credentials.api_key == "":
        return None
    return credentials


# The authenticator decided who this is; the token only carries it to the SDK, so one built
# token per principal serves every request it makes (nothing in the SDK changes a verified
# token): the 1,024 most recent principals keep theirs.
@functools.lru_cache(maxsize=1024)
def _access_token(principal: Principal) -> PrincipalAccessToken:
    """The SDK access token that carries ``principal``."""
    # Built without validation (``model_construct``): every field is already a checked
    # string (tests/mcp/test_mcp_token_verifier.py).
    # The SDK binds sessions to (client_id, issuer, subject): include the tenant, escaped
    # as in ``principal_key``, so the same subject in two tenants never shares a session
    # (unescaped, tenant "acme/x" with key "k1" and tenant "acme" read "acme/x/k1" alike).
    return PrincipalAccessToken.model_construct(
        token="",
        client_id=principal_key(principal.tenant_id, principal.api_key_id or principal.subject),
        scopes=sorted(principal.scopes),
        subject=principal.subject,
        principal=principal,
    )


@functools.lru_cache(maxsize=1024)
def _authenticated(principal: Principal) -> tuple[AuthCredentials, AuthenticatedUser]:
    """What the bearer middleware puts on the scope for ``principal`` (nothing changes it)."""
    token = _access_token(principal)
    return AuthCredentials(token.scopes), AuthenticatedUser(token)


def principal_from_scope(scope: Any) -> Principal | None:
    """The principal the bearer middleware put on an ASGI scope, if any."""
    user = scope.get("user") if isinstance(scope, dict) else None
    if isinstance(user, AuthenticatedUser):
        token = user.access_token
        if isinstance(token, PrincipalAccessToken):
            return token.principal
    return None
