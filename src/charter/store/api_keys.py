"""API keys kept in the store: create (the secret is shown once), list, revoke, authenticate.

A key reads ``chk_<id>_<secret>``. The id is public (it names the key in lists, audit
events and revocations); only a hash of the secret is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from ..auth import AuthenticationFailed, Credentials, Principal, PrincipalKind

__all__ = ("API_KEY_PREFIX", "ApiKeyAuthenticator", "ApiKeyRecord", "ApiKeyVerifier")

API_KEY_PREFIX = "chk_"
"""Every charter API key starts with this, so secret scanners and people can spot one."""

_INVALID = "the credentials are not valid"


class ApiKeyRecord(BaseModel):
    """A stored API key as listed: who it authenticates and what it grants, never its secret."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """The public key id (the ``<id>`` in ``chk_<id>_<secret>``)."""
    tenant_id: str
    subject: str
    scopes: tuple[str, ...]
    kind: PrincipalKind
    actor: str
    name: str | None = None
    """A label for people (shown as the principal's ``display_name``)."""
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None

    def active(self, now: datetime) -> bool:
        """Whether the key authenticates at ``now`` (not revoked, not expired)."""
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class ApiKeyVerifier(Protocol):
    """Protocol: looks a presented key up (``SqlStore`` is one)."""

    async def verify_api_key(self, presented: str, *, now: datetime) -> ApiKeyRecord | None:
        """The active key ``presented`` names, or None."""
        ...


class ApiKeyAuthenticator:
    """An ``Authenticator`` over the API keys in a ``SqlStore``.

    Reads ``Credentials.api_key``, or else ``Credentials.bearer``. An unknown, malformed,
    revoked or expired key fails with one message, so a caller cannot tell which.
    """

    def __init__(
        self, store: ApiKeyVerifier, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        """Authenticate against ``store``.

        Args:
            store: An open ``SqlStore`` (or anything else that verifies keys).
            clock: The current UTC time (injected by tests).
        """
        self._store = store
        self._clock = clock or (lambda: datetime.now(UTC))

    def __repr__(self) -> str:
        return f"ApiKeyAuthenticator({self._store!r})"

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        """Look the presented key up.

        Args:
            credentials: What the transport received.

        Returns:
            A principal of the key's kind (``agent`` by default) with ``api_key_id`` set
            and scopes read with ``parse_scopes``; None when no key or token was sent.

        Raises:
            AuthenticationFailed: The key is unknown, malformed, revoked or expired, or
                both an API key and a bearer token were sent.
        """
        presented = [c for c in (credentials.api_key, credentials.bearer) if c is not None]
        if not presented:
            return None
        if len(presented) > 1:
            raise AuthenticationFailed("send either a bearer token or an API key, not both")
        record = await self._store.verify_api_key(presented[0], now=self._clock())
        if record is None:
            raise AuthenticationFailed(_INVALID)
        try:
            return Principal.from_claims(
                subject=record.subject,
                tenant_id=record.tenant_id,
                scopes=list(record.scopes),
                kind=record.kind,
                actor=record.actor,
                api_key_id=record.id,
                display_name=record.name,
            )
        except (TypeError, ValueError):
            # A row edited by hand into something no principal can hold.
            raise AuthenticationFailed(_INVALID) from None
