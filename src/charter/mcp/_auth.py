"""The SDK's ``TokenVerifier`` hook, backed by the host's ``Authenticator``."""

from __future__ import annotations

import functools
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict

from ..auth import AuthenticationFailed, Credentials, Principal, principal_key
from ..host import Host

__all__ = ("HostTokenVerifier", "PrincipalAccessToken", "principal_from_scope")


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
        try:
            principal = await self._host.authenticate(Credentials(bearer=token))
        except AuthenticationFailed:
            return None
        if principal is None:
            return None
        return _access_token(principal)


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


def principal_from_scope(scope: Any) -> Principal | None:
    """The principal the bearer middleware put on an ASGI scope, if any."""
    user = scope.get("user") if isinstance(scope, dict) else None
    if isinstance(user, AuthenticatedUser):
        token = user.access_token
        if isinstance(token, PrincipalAccessToken):
            return token.principal
    return None
