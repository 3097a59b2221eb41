"""The SDK's ``TokenVerifier`` hook and bearer backend, backed by the host's ``Authenticator``."""

from __future__ import annotations

import functools
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict
from starlette.authentication import AuthCredentials
from starlette.requests import HTTPConnection

from ..auth import AuthenticationFailed, Credentials, Principal, principal_key
from ..host import Host

__all__ = (
    "HostBearerBackend",
    "HostTokenVerifier",
    "PrincipalAccessToken",
    "bearer_token",
    "principal_from_scope",
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
        try:
            return await self._host.authenticate(Credentials(bearer=token))
        except AuthenticationFailed:
            return None


class HostBearerBackend(BearerAuthBackend):
    """The SDK's ``BearerAuthBackend`` over ``HostTokenVerifier``, for less per request.

    It answers as the SDK's does (the first ``Authorization`` header, its ``Bearer``
    prefix in any case, the rest the token; no token or a refused one: anonymous, so
    ``RequireAuthMiddleware`` answers 401), and the SDK's middleware does the rest.
    What it saves: the header is found in the ASGI headers without building Starlette's
    ``Headers`` (the SDK's backend looks every header up again by name), and the access
    token, credentials and user it hands the SDK are built once per principal. A
    charter access token never expires on its own and names no resource (the host's
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
        token = bearer_token(conn.scope)
        if token is None:
            return None
        principal = await self._verifier.principal(token)
        return None if principal is None else _authenticated(principal)


def bearer_token(scope: Any) -> str | None:
    """The bearer token an ASGI scope's request sent, read as the SDK's bearer backend reads it.

    The first ``Authorization`` header, its ``Bearer`` prefix in any case, the rest the
    token; None when there is no such header or it names another scheme. Read from the
    ASGI headers, without building Starlette's ``Headers``.
    """
    for name, value in scope["headers"]:
        if name == b"authorization":
            header: str = value.decode("latin-1")
            break
    else:
        return None
    if header[:7].lower() != "bearer ":
        return None
    return header[7:]


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
