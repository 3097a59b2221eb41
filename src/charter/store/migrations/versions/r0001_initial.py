"""Create charter's tables: ledger entries, approvals, claims, deferred, audit, API keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Written by hand. Types are spelled out (in ``_columns``, frozen) rather than imported from
``_schema`` so this revision keeps describing the same schema when the code moves on.
Timestamps are ``timestamptz`` on PostgreSQL and fixed-width ISO 8601 UTC text on SQLite;
JSON is text.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from charter.store.migrations._columns import bound_command, request_key, sequence, texts, times

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the tables and indexes."""
    op.create_table(
        "charter_ledger_entries",
        *request_key(),
        *bound_command(),
        *texts("status"),
        *texts("outcome", "approval_id", nullable=True),
        *texts("invocation_id"),
        *times("created_at", "expires_at"),
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
        *texts("id", "tenant_id", "requester_id", "request_id"),
        *bound_command(),
        *texts("arguments", "risk"),
        *texts("reason_code", nullable=True),
        *texts("status"),
        *times("created_at", "expires_at"),
        *texts("decided_by", nullable=True),
        *times("decided_at", nullable=True),
        *texts("decision_reason", "consumed_by", nullable=True),
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
        *request_key(),
        *texts("capability_id", "fingerprint"),
        *texts("result_reference", nullable=True),
        *times("created_at"),
        sa.PrimaryKeyConstraint(
            "tenant_id", "principal_id", "request_id", name="pk_charter_claims"
        ),
    )

    op.create_table(
        "charter_deferred",
        *texts("invocation_id"),
        *request_key(),
        *texts("tool", "status"),
        *texts("outcome", nullable=True),
        *times("created_at"),
        *times("settled_at", nullable=True),
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
        sequence(),
        *texts("id"),
        *times("time"),
        *texts("tenant", "principal_tenant", "subject", nullable=True),
        *texts("tool"),
        *texts("request_id", nullable=True),
        *texts("outcome", "event"),
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
        *texts("id", "tenant_id", "subject", "scopes", "kind", "actor"),
        *texts("name", nullable=True),
        *texts("secret_hash"),
        *times("created_at"),
        *times("expires_at", "revoked_at", nullable=True),
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
