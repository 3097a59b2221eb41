"""API keys kept in the store: create (the secret is shown once), list, revoke, authenticate.

A key reads ``chk_<id>_<secret>``. The id is public (it names the key in lists, audit
events and revocations); only a hash of the secret is stored.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from ..auth import AuthenticationFailed, Credentials, Principal, PrincipalKind, presented_token

__all__ = ("API_KEY_PREFIX", "ApiKeyAuthenticator", "ApiKeyRecord", "ApiKeyVerifier")

API_KEY_PREFIX = "chk_"
"""Every charter API key starts with this, so secret scanners and people can spot one."""

_INVALID = "the credentials are not valid"
_CACHED_KEYS = 4096
"""Verified keys one authenticator remembers at most (the oldest is forgotten first)."""


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

    Reads the one key sent, as an API key or a bearer token (``presented_token``: both
    are refused, as ``StaticAuthenticator`` refuses them). An unknown, malformed,
    revoked or expired key fails with one message, so a caller cannot tell which.

    A key the store verified is remembered for ``cache_seconds`` (5 by default), so a
    busy server does not query the store on every request: a key revoked in the store
    (``charter keys revoke``, from any process) stops working within that time, and an
    expiring key stops at its ``expires_at`` exactly. Failures are never remembered.
    Requests that present the same key while the store checks it wait for that check
    instead of each asking the store (when the remembered key expires under load).
    """

    def __init__(
        self,
        store: ApiKeyVerifier,
        *,
        clock: Callable[[], datetime] | None = None,
        cache_seconds: float = 5.0,
    ) -> None:
        """Authenticate against ``store``.

        Args:
            store: An open ``SqlStore`` (or anything else that verifies keys).
            clock: The current UTC time (injected by tests).
            cache_seconds: How long a verified key is trusted without asking the store
                again: the longest a revoked key keeps working. 0 asks on every request.

        Raises:
            ValueError: ``cache_seconds`` is negative.
        """
        if cache_seconds < 0:
            raise ValueError("cache_seconds must be 0 or more")
        self._store = store
        self._clock = clock or (lambda: datetime.now(UTC))
        self._cache_for = timedelta(seconds=cache_seconds)
        # SHA-256 of the presented key -> (the record, its principal, when verified).
        self._verified: dict[bytes, tuple[ApiKeyRecord, Principal, datetime]] = {}
        # SHA-256 of the presented key -> the store's check of it, while in flight, and
        # when it began (what it learns is trusted from then, by whoever shares it).
        self._checking: dict[bytes, tuple[asyncio.Task[ApiKeyRecord | None], datetime]] = {}

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
        presented = presented_token(credentials)
        if presented is None:
            return None
        now = self._clock()
        # Keyed by a digest, so the cache holds no usable key.
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        cached = self._verified.get(digest)
        if cached is not None:
            remembered, principal, verified_at = cached
            if verified_at <= now < verified_at + self._cache_for and remembered.active(now):
                return principal
            del self._verified[digest]
        record, checked_at = await self._check(digest, presented, now)
        if record is None:
            raise AuthenticationFailed(_INVALID)
        principal = self._principal(record)
        if self._cache_for:
            if len(self._verified) >= _CACHED_KEYS:
                del self._verified[next(iter(self._verified))]
            self._verified[digest] = (record, principal, checked_at)
        return principal

    async def _check(
        self, digest: bytes, presented: str, now: datetime
    ) -> tuple[ApiKeyRecord | None, datetime]:
        """The store's answer for ``presented``, shared with the requests that ask meanwhile.

        With when the check began: a request that joined it later learns nothing newer.
        """
        if not self._cache_for:
            return await self._store.verify_api_key(presented, now=now), now  # asks every time
        checking = self._checking.get(digest)
        if checking is None or checking[0].get_loop() is not asyncio.get_running_loop():
            check = asyncio.ensure_future(self._store.verify_api_key(presented, now=now))
            checking = self._checking[digest] = (check, now)
            check.add_done_callback(lambda done: self._forget(digest, done))
        check, began = checking
        # Shielded: one caller's cancellation must not cancel the others' answer.
        return await asyncio.shield(check), began

    def _forget(self, digest: bytes, check: asyncio.Task[ApiKeyRecord | None]) -> None:
        checking = self._checking.get(digest)
        if checking is not None and checking[0] is check:
            del self._checking[digest]
        if not check.cancelled():
            check.exception()  # retrieved, even when every caller was cancelled meanwhile

    @staticmethod
    def _principal(record: ApiKeyRecord) -> Principal:
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
