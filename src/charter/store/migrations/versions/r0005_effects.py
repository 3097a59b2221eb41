"""Create ``charter_effects``: the effect outbox workers share.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Written by hand, like the others. One row per effect a call (or host code) recorded in its
transaction, keyed by its idempotency key; workers claim due rows under a lease
(``charter.effects``, docs/effects.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from charter.store.migrations._columns import texts, times

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table and the indexes workers and listings use."""
    op.create_table(
        "charter_effects",
        *texts("key", "tenant_id", "name", "payload"),
        sa.Column("seq", sa.Integer(), nullable=False),
        *texts("request_id", "principal_id", "tool", nullable=True),
        *texts("status"),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        *times("next_attempt_at"),
        *times("lease_until", nullable=True),
        *texts("leased_by", "last_error", nullable=True),
        *times("created_at", "updated_at"),
        *times("delivered_at", nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'delivered', 'dead', 'discarded')",
            name="ck_charter_effects_status",
        ),
        sa.PrimaryKeyConstraint("key", name="pk_charter_effects"),
    )
    op.create_index(
        "ix_charter_effects_status_next_attempt_at",
        "charter_effects",
        ["status", "next_attempt_at"],
    )
    op.create_index(
        "ix_charter_effects_tenant_id_created_at", "charter_effects", ["tenant_id", "created_at"]
    )
    op.create_index(
        "ix_charter_effects_tenant_id_request_id", "charter_effects", ["tenant_id", "request_id"]
    )


def downgrade() -> None:
    """Drop the table (pending effects are lost)."""
    op.drop_index("ix_charter_effects_tenant_id_request_id", table_name="charter_effects")
    op.drop_index("ix_charter_effects_tenant_id_created_at", table_name="charter_effects")
    op.drop_index("ix_charter_effects_status_next_attempt_at", table_name="charter_effects")
    op.drop_table("charter_effects")
