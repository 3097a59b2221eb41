"""API keys kept in the store: create (the secret is shown once), list, revoke, authenticate.

A key reads ``chk_<id>_<secret>``. The id is public (it names the key in lists, audit
events and revocations); only a hash of the secret is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy.ext.asyncio import AsyncConnection

from ..auth import (
    AuthenticationFailed,
    Credentials,
    Principal,
    PrincipalKind,
    is_valid_scope,
)
from ._schema import api_keys
from ._types import check_storable, is_storable

if TYPE_CHECKING:
    from .sql import SqlStore

__all__ = ("API_KEY_PREFIX", "ApiKeyAuthenticator", "ApiKeyRecord")

API_KEY_PREFIX = "chk_"
"""Every charter API key starts with this, so secret scanners and people can spot one."""

_KEY = re.compile(r"chk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_INVALID = "the credentials are not valid"
# Compared against when the key id is unknown, so that path hashes and compares too.
_DUMMY_HASH = hashlib.sha256(b"charter-api-key:unknown").hexdigest()


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


def _hash(key_id: str, secret: str) -> str:
    # SHA-256, not bcrypt/scrypt/argon2: the secret is 256 bits from `secrets`, so no
    # guess can find a preimage, and slow password hashes exist to protect low-entropy
    # human passwords; here they would only add CPU cost to every request (and a way to
    # overload the server with bad keys). The key id is hashed in too, so a hash is bound
    # to its row and cannot be copied onto another key.
    return hashlib.sha256(f"charter-api-key:{key_id}:{secret}".encode()).hexdigest()


def _record(row: sa.Row[Any]) -> ApiKeyRecord:
    values = dict(row._mapping)
    values.pop("secret_hash", None)
    return ApiKeyRecord.model_validate(values)


def _check_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    if isinstance(scopes, str):
        raise TypeError("scopes must be a list of scope strings, not one string")
    listed = tuple(scopes)
    invalid = sorted(repr(s) for s in listed if not is_valid_scope(s))
    if invalid:
        raise ValueError(f"invalid scopes {', '.join(invalid)}; see charter.auth.is_valid_scope")
    return tuple(sorted(set(listed)))


async def create_key(
    conn: AsyncConnection,
    *,
    tenant_id: str,
    subject: str,
    scopes: Iterable[str],
    kind: PrincipalKind,
    actor: str,
    name: str | None,
    expires_at: datetime | None,
    now: datetime,
) -> tuple[str, ApiKeyRecord]:
    """Insert a new key on ``conn``; return the full key (once) and its record."""
    granted = _check_scopes(scopes)
    # Fails here, not at the first request, on a blank tenant or subject or unknown kind.
    Principal(
        subject=subject, tenant_id=tenant_id, scopes=frozenset(granted), kind=kind, actor=actor
    )
    if name is not None:
        check_storable(name)
    if expires_at is not None and expires_at.tzinfo is None:
        raise ValueError("expires_at must be timezone-aware")
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    record = ApiKeyRecord(
        id=key_id,
        tenant_id=tenant_id,
        subject=subject,
        scopes=granted,
        kind=kind,
        actor=actor,
        name=name,
        created_at=now,
        expires_at=expires_at,
    )
    values = record.model_dump()
    values["scopes"] = list(granted)
    await conn.execute(sa.insert(api_keys).values(**values, secret_hash=_hash(key_id, secret)))
    return f"{API_KEY_PREFIX}{key_id}_{secret}", record


async def list_keys(conn: AsyncConnection, tenant_id: str | None) -> list[ApiKeyRecord]:
    """The keys of one tenant, or all, oldest first."""
    statement = sa.select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id)
    if tenant_id is not None:
        if not is_storable(tenant_id):
            return []
        statement = statement.where(api_keys.c.tenant_id == tenant_id)
    return [_record(row) for row in await conn.execute(statement)]


async def revoke_key(conn: AsyncConnection, key_id: str, now: datetime) -> bool:
    """Revoke a key; False when there is no such key or it was already revoked."""
    if not is_storable(key_id):
        return False
    result = await conn.execute(
        sa.update(api_keys)
        .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return result.rowcount == 1


async def verify_key(conn: AsyncConnection, presented: str, now: datetime) -> ApiKeyRecord | None:
    """Return the active key ``presented`` names if its secret matches, else None.

    Every failure (malformed, unknown, wrong secret, revoked, expired) returns None, and
    an unknown id still pays for a hash and a constant-time comparison.
    """
    match = _KEY.fullmatch(presented)
    if match is None:
        return None
    key_id, secret = match.groups()
    row = (await conn.execute(sa.select(api_keys).where(api_keys.c.id == key_id))).first()
    stored = row._mapping["secret_hash"] if row is not None else _DUMMY_HASH
    if not hmac.compare_digest(stored.encode(), _hash(key_id, secret).encode()) or row is None:
        return None
    record = _record(row)
    return record if record.active(now) else None


class ApiKeyAuthenticator:
    """An ``Authenticator`` over the API keys in a ``SqlStore``.

    Reads ``Credentials.api_key``, or else ``Credentials.bearer``. An unknown, malformed,
    revoked or expired key fails with one message, so a caller cannot tell which.
    """

    def __init__(self, store: SqlStore, *, clock: Callable[[], datetime] | None = None) -> None:
        """Authenticate against ``store``.

        Args:
            store: An open ``SqlStore``.
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
            A principal of the key's kind (``api_key`` by default) with ``api_key_id`` set
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
