"""The statements a ledgered call runs, built once per dialect with named bind parameters.

A statement built per call (``insert(t).values(**row)``, ``column == value`` clauses) costs
more CPU than executing it: SQLAlchemy builds the expression and its cache key every time.
These are constants: the values come with ``execute(statement, parameters)``, SQLAlchemy's
cache key is memoised on the object, and the compiled form is reused from its cache.

Key columns are bound as ``key_<column>`` in WHERE clauses: an UPDATE sets the columns
named by the other parameters (``status``, ``outcome``, …), so a key parameter named like
its column would be set too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ._schema import approvals, audit_events, claims, deferred, ledger_entries

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

__all__ = ("KEY", "Statements", "audit_parameters", "insert", "key_parameters", "statements")

KEY = ("tenant_id", "principal_id", "request_id")
"""The key columns of ledger entries and created-target claims."""


def key_parameters(tenant_id: str, principal_id: str, request_id: str) -> dict[str, Any]:
    """The bind parameters of a ``key_*`` WHERE clause."""
    return {
        "key_tenant_id": tenant_id,
        "key_principal_id": principal_id,
        "key_request_id": request_id,
    }


_AUDIT_COLUMNS = (
    "id",
    "time",
    "tenant",
    "principal_tenant",
    "subject",
    "tool",
    "request_id",
    "outcome",
    "event",
)
"""The columns ``audit_values`` fills."""


def audit_parameters(values: dict[str, Any]) -> dict[str, Any]:
    """``audit_values(event)`` as the bind parameters of ``complete_checked_with_audit``."""
    return {f"audit_{name}": value for name, value in values.items()}


def _complete_checked(audited: bool) -> sa.Executable:
    """PostgreSQL: ``complete`` that fails (division by zero) when it updates no row.

    It goes in one pipeline with ``COMMIT`` (``_pipelined``): its error aborts the
    ``COMMIT``, where a row count read afterwards would come too late. With ``audited``,
    the audit event's INSERT goes in the same statement.
    """
    done = (
        sa.update(ledger_entries)
        .where(_by_key(ledger_entries))
        .values(status=sa.bindparam("status"), outcome=sa.bindparam("outcome"))
        .returning(ledger_entries.c.request_id)
        .cte("charter_outcome")
    )
    checked: sa.Select[Any] = sa.select(sa.literal_column("1 / count(*)")).select_from(done)
    if not audited:
        return checked
    row = {
        name: sa.bindparam(f"audit_{name}", type_=audit_events.c[name].type)
        for name in _AUDIT_COLUMNS
    }
    return checked.add_cte(sa.insert(audit_events).values(row).cte("charter_audit_row"))


def _by_key(table: sa.Table) -> sa.ColumnElement[bool]:
    return sa.and_(*(table.c[name] == sa.bindparam(f"key_{name}") for name in KEY))


def insert(dialect: str, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
    """An INSERT on ``table`` that supports ``ON CONFLICT`` in ``dialect``'s database.

    The dialect's module is imported here, on first use: a store on SQLite (every test's
    and the demo's ``charter serve``) never loads PostgreSQL's, a tenth of SQLAlchemy's
    import time.
    """
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table)


def _upsert(dialect: str, table: sa.Table, index: tuple[str, ...]) -> sa.Executable:
    """INSERT, or on a key conflict overwrite the other columns with the new row's values."""
    statement = insert(dialect, table)
    return statement.on_conflict_do_update(
        index_elements=list(index),
        set_={c.name: statement.excluded[c.name] for c in table.c if c.name not in index},
    )


@dataclass(frozen=True, slots=True)
class Statements:
    """One dialect's statements; the docstring of each field names its parameters."""

    claim: sa.Executable
    """INSERT a ledger row unless its key exists (rowcount 0): every column."""
    read_entry: sa.Select[Any]
    """SELECT one ledger row: ``key_*``."""
    replace_expired: sa.Executable
    """UPDATE an expired ledger row: ``key_*``, ``now`` and every non-key column."""
    complete: sa.Executable
    """UPDATE a claimed ledger row: ``key_*``, ``status``, ``outcome``."""
    complete_checked: sa.Executable | None
    """PostgreSQL (None on SQLite): ``complete`` that fails when it updates no row, sent
    with ``COMMIT``; the same parameters."""
    complete_checked_with_audit: sa.Executable | None
    """``complete_checked`` that also inserts an audit event, ``audit_parameters(...)`` (a
    data-modifying CTE, which SQLite has not)."""
    drop_claim: sa.Executable
    """DELETE a created-target claim: ``key_*``."""
    consume_approval: sa.Executable
    """UPDATE an approved, unexpired approval to consumed: ``key_id``, ``now``, ``consumed_by``."""
    read_claim: sa.Select[Any]
    """SELECT a created-target claim: ``key_*``."""
    insert_claim: sa.Executable
    """Upsert a created-target claim: every column."""
    record_claim_result: sa.Executable
    """UPDATE a claim's result: ``key_*``, ``result_reference``."""
    insert_deferred: sa.Executable
    """Upsert a deferred record: every column."""
    insert_audit: sa.Executable
    """INSERT an audit event: ``audit_values(event)``."""
    settle_entry: sa.Executable
    """UPDATE the ledger row a deferred call created: ``key_*``, ``key_invocation_id``,
    ``status``, ``outcome``."""


@cache
def statements(dialect: str) -> Statements:
    """The statements for ``dialect`` (``sqlite`` or ``postgresql``), built on first use."""
    entry = ledger_entries.c
    approval = approvals.c
    return Statements(
        # SQLAlchemy keeps an INSERT's rowcount only when asked (UPDATE/DELETE always).
        claim=insert(dialect, ledger_entries)
        .on_conflict_do_nothing(index_elements=list(KEY))
        .execution_options(preserve_rowcount=True),
        read_entry=sa.select(ledger_entries).where(_by_key(ledger_entries)),
        replace_expired=sa.update(ledger_entries).where(
            _by_key(ledger_entries), entry.expires_at <= sa.bindparam("now")
        ),
        complete=sa.update(ledger_entries).where(_by_key(ledger_entries)),
        complete_checked=_complete_checked(False) if dialect == "postgresql" else None,
        complete_checked_with_audit=_complete_checked(True) if dialect == "postgresql" else None,
        drop_claim=sa.delete(claims).where(_by_key(claims)),
        consume_approval=sa.update(approvals)
        .where(
            approval.id == sa.bindparam("key_id"),
            approval.status == "approved",
            approval.expires_at > sa.bindparam("now"),
        )
        .values(status="consumed"),
        read_claim=sa.select(claims).where(_by_key(claims)),
        insert_claim=_upsert(dialect, claims, KEY),
        record_claim_result=sa.update(claims).where(_by_key(claims)),
        insert_deferred=_upsert(dialect, deferred, ("invocation_id",)),
        insert_audit=sa.insert(audit_events),
        settle_entry=sa.update(ledger_entries).where(
            _by_key(ledger_entries),
            # The entry this call created, not a later one that reused the key.
            entry.invocation_id == sa.bindparam("key_invocation_id"),
        ),
    )
