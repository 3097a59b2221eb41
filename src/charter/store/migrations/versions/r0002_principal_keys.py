"""Principals stored as (home tenant, subject), approval histories, person/agent/service kinds.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

- Ledger entries, claims and deferred records keyed by a principal now store its key,
  ``<home tenant>/<subject>`` (``charter.auth.principal_key``: the tenant's ``%`` and
  ``/`` percent-escaped), instead of the bare subject, which collided across tenants.
  Approvals do the same for ``requester_id`` and ``decided_by``. Existing rows take the
  row's tenant as the home tenant: right for every call that was not delegated (a
  delegated call's old row keeps no trace of the caller's home tenant; its replay window
  is the retention period).
- ``charter_approvals.history``: every decision, as a JSON list.
- API key kinds become ``person``, ``agent`` or ``service``: ``user`` is a person,
  ``api_key`` and ``agent`` agents, ``workflow`` and ``system`` services. Keys that must
  decide approvals need ``person`` (re-create them with ``--kind person``).

Written by hand, like 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEYED = (
    ("charter_ledger_entries", "principal_id"),
    ("charter_claims", "principal_id"),
    ("charter_deferred", "principal_id"),
    ("charter_approvals", "requester_id"),
    ("charter_approvals", "decided_by"),
)

_KINDS = {"user": "person", "api_key": "agent", "workflow": "service", "system": "service"}


def _escaped_tenant() -> str:
    # principal_key's escaping, in SQL both databases run: '%' first, then '/'.
    return "replace(replace(tenant_id, '%', '%25'), '/', '%2F')"


def upgrade() -> None:
    """Rewrite stored principals as keys, add approval histories, map key kinds."""
    for table, column in _KEYED:
        op.execute(
            f"UPDATE {table} SET {column} = {_escaped_tenant()} || '/' || {column} "
            f"WHERE {column} IS NOT NULL AND {column} <> 'anonymous'"
        )
    op.add_column(
        "charter_approvals",
        sa.Column("history", sa.Text(), nullable=False, server_default="[]"),
    )
    for old, new in _KINDS.items():
        op.execute(
            sa.text("UPDATE charter_api_keys SET kind = :new WHERE kind = :old").bindparams(
                new=new, old=old
            )
        )


def downgrade() -> None:
    """Back to bare subjects and the old kinds (histories are dropped)."""
    bind = op.get_bind()
    for old, new in (("person", "user"), ("agent", "api_key"), ("service", "system")):
        op.execute(
            sa.text("UPDATE charter_api_keys SET kind = :old WHERE kind = :new").bindparams(
                new=new, old=old
            )
        )
    with op.batch_alter_table("charter_approvals") as batch:
        batch.drop_column("history")
    position = "instr" if bind.dialect.name == "sqlite" else "strpos"
    for table, column in _KEYED:
        op.execute(
            f"UPDATE {table} SET {column} = substr({column}, {position}({column}, '/') + 1) "
            f"WHERE {column} IS NOT NULL AND {column} <> 'anonymous'"
        )
