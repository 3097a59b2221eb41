"""Secrets shared by every process on one database, created once by whichever asks first."""

from __future__ import annotations

import secrets
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ._schema import secrets as secrets_table
from ._statements import insert

__all__ = ("REQUEST_STATE_KEY", "shared_secret")

REQUEST_STATE_KEY = "mcp-request-state"
"""The row holding the key that seals MCP ``requestState``."""

_SECRET_BYTES = 32


async def shared_secret(conn: AsyncConnection, name: str, now: datetime) -> bytes:
    """The secret ``name``, created with 32 random bytes if no process has created it yet.

    Race-safe without a lock: every process inserts its own candidate with ``ON CONFLICT
    DO NOTHING`` and then reads the row, so all of them use the one that was inserted first.
    """
    candidate = secrets.token_hex(_SECRET_BYTES)
    statement = insert(conn.dialect.name, secrets_table).on_conflict_do_nothing(
        index_elements=["name"]
    )
    await conn.execute(statement, {"name": name, "secret": candidate, "created_at": now})
    stored = await conn.scalar(
        sa.select(secrets_table.c.secret).where(secrets_table.c.name == name)
    )
    assert isinstance(stored, str)
    return bytes.fromhex(stored)
