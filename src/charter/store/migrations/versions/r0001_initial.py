"""Create charter's tables: ledger entries, approvals, claims, deferred, audit, API keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Written by hand. Types are spelled out here rather than imported from ``_schema`` so this
revision keeps describing the same schema when the code moves on. Timestamps are
``timestamptz`` on PostgreSQL and fixed-width ISO 8601 UTC text on SQLite; JSON is text.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _time() -> sa.types.TypeEngine[datetime]:
    return sa.DateTime(timezone=True).with_variant(sa.String(32), "sqlite")


def upgrade() -> None:
    """Create the tables and indexes."""
    op.create_table(
        "charter_ledger_entries",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("capability_id", sa.Text(), nullable=False),
        sa.Column("capability_version", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=True),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("approval_id", sa.Text(), nullable=True),
        sa.Column("invocation_id", sa.Text(), nullable=False),
        sa.Column("created_at", _time(), nullable=False),
        sa.Column("expires_at", _time(), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "principal_id", "request_id", name="pk_charter_ledger_entries"
        ),
        sa.CheckConstraint(
            "status IN ('in_progress', 'completed', 'deferred')",
            name="ck_charter_ledger_entries_status",
        ),
    )
    op.create_index(
        "ix_charter_ledger_entries_status_expires_at",
        "charter_ledger_entries",
        ["status", "expires_at"],
    )

    op.create_table(
        "charter_approvals",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("requester_id", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("capability_id", sa.Text(), nullable=False),
        sa.Column("capability_version", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=True),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("risk", sa.Text(), nullable=False),
        sa.Column("reason_code", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("created_at", _time(), nullable=False),
        sa.Column("expires_at", _time(), nullable=False),
        sa.Column("decided_by", sa.Text(), nullable=True),
        sa.Column("decided_at", _time(), nullable=True),
        sa.Column("decision_reason", sa.Text(), nullable=True),
        sa.Column("consumed_by", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_charter_approvals"),
        # One approval per (tenant, requester, request id): the arbiter of "create or return".
        sa.UniqueConstraint(
            "tenant_id",
            "requester_id",
            "request_id",
            name="uq_charter_approvals_tenant_id_requester_id_request_id",
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'approved', 'denied', 'consumed')",
            name="ck_charter_approvals_status",
        ),
    )
    op.create_index(
        "ix_charter_approvals_tenant_id_status_created_at",
        "charter_approvals",
        ["tenant_id", "status", "created_at"],
    )
    op.create_index(
        "ix_charter_approvals_status_expires_at", "charter_approvals", ["status", "expires_at"]
    )

    op.create_table(
        "charter_claims",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=False),
        sa.Column("capability_id", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("result_reference", sa.Text(), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "principal_id", "request_id", name="pk_charter_claims"
        ),
    )

    op.create_table(
        "charter_deferred",
        sa.Column("invocation_id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("created_at", _time(), nullable=False),
        sa.Column("settled_at", _time(), nullable=True),
        sa.PrimaryKeyConstraint("invocation_id", name="pk_charter_deferred"),
        sa.CheckConstraint("status IN ('active', 'settled')", name="ck_charter_deferred_status"),
    )
    op.create_index(
        "ix_charter_deferred_tenant_id_principal_id_request_id",
        "charter_deferred",
        ["tenant_id", "principal_id", "request_id"],
    )

    op.create_table(
        "charter_audit_events",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("time", _time(), nullable=False),
        sa.Column("tenant", sa.Text(), nullable=True),
        sa.Column("principal_tenant", sa.Text(), nullable=True),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_charter_audit_events"),
        sa.UniqueConstraint("id", name="uq_charter_audit_events_id"),
    )
    op.create_index(
        "ix_charter_audit_events_tenant_time", "charter_audit_events", ["tenant", "time"]
    )
    op.create_index(
        "ix_charter_audit_events_principal_tenant_time",
        "charter_audit_events",
        ["principal_tenant", "time"],
    )

    op.create_table(
        "charter_api_keys",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("scopes", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("secret_hash", sa.Text(), nullable=False),
        sa.Column("created_at", _time(), nullable=False),
        sa.Column("expires_at", _time(), nullable=True),
        sa.Column("revoked_at", _time(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_charter_api_keys"),
    )
    op.create_index("ix_charter_api_keys_tenant_id", "charter_api_keys", ["tenant_id"])


def downgrade() -> None:
    """Drop everything ``upgrade`` created."""
    for table in (
        "charter_api_keys",
        "charter_audit_events",
        "charter_deferred",
        "charter_claims",
        "charter_approvals",
        "charter_ledger_entries",
    ):
        op.drop_table(table)
