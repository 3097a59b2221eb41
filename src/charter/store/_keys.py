"""API keys in the database: create, list, revoke and verify (used by ``SqlStore``)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..auth import Principal, PrincipalKind, is_valid_scope
from ._schema import api_keys
from ._types import check_storable, is_storable
from .api_keys import API_KEY_PREFIX, ApiKeyRecord

__all__ = ("create_key", "list_keys", "revoke_key", "verify_key")

_KEY = re.compile(r"chk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
# Compared against when the key id is unknown, so that path hashes and compares too.
_DUMMY_HASH = hashlib.sha256(b"charter-api-key:unknown").hexdigest()


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
