"""The column definitions charter's hand-written revisions share.

Frozen: a shipped revision must keep creating the same schema, so what a helper here
returns never changes (``tests/store/test_sql_migrations.py`` builds the schema from the
revisions and compares it with ``_schema``). A revision that needs another shape spells it
out, or adds a new helper. Types are spelled out here, not imported from ``_schema``, for
the same reason.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

__all__ = ("bound_command", "request_key", "sequence", "texts", "times")


def _time() -> sa.types.TypeEngine[datetime]:
    """``timestamptz`` on PostgreSQL; fixed-width ISO 8601 UTC text on SQLite."""
    return sa.DateTime(timezone=True).with_variant(sa.String(32), "sqlite")


def texts(*names: str, nullable: bool = False) -> tuple[sa.Column[str], ...]:
    """One ``TEXT`` column per name, in order, all ``NOT NULL`` unless ``nullable``."""
    return tuple(sa.Column(name, sa.Text(), nullable=nullable) for name in names)


def times(*names: str, nullable: bool = False) -> tuple[sa.Column[datetime], ...]:
    """One timestamp column per name, in order, all ``NOT NULL`` unless ``nullable``."""
    return tuple(sa.Column(name, _time(), nullable=nullable) for name in names)


def sequence() -> sa.Column[int]:
    """``seq``: BIGINT on PostgreSQL, INTEGER (the rowid alias) on SQLite, autoincrement.

    The table's primary key constraint names it.
    """
    return sa.Column(
        "seq",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    )


def request_key() -> tuple[sa.Column[str], ...]:
    """A row about one request: tenant, principal, request id (not the constraint)."""
    return texts("tenant_id", "principal_id", "request_id")


def bound_command() -> tuple[sa.Column[str], ...]:
    """The exact command a row is bound to: the tool at its version, target, fingerprint."""
    return (
        *texts("tool", "capability_id", "capability_version"),
        *texts("target", nullable=True),
        *texts("fingerprint"),
    )
