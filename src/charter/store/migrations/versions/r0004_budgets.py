"""Create ``charter_budgets``: the rate-limit buckets every replica on the database shares.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Written by hand, like the others. One row per declared limit and holder (a principal, a
tenant, or a whole tool), holding one number: its theoretical arrival time in Unix seconds
(``charter.ledger.budgets``). A row whose time has passed means the same as no row;
``charter db prune`` deletes those.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from charter.store.migrations._columns import texts

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table and its tenant index."""
    op.create_table(
        "charter_budgets",
        *texts("bucket_key", "tool", "limit_name", "holder", "tenant"),
        sa.Column("arrival", sa.Double(), nullable=False),
        sa.Column("interval_seconds", sa.Double(), nullable=False),
        sa.Column("window_seconds", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("bucket_key", name="pk_charter_budgets"),
    )
    op.create_index("ix_charter_budgets_tenant", "charter_budgets", ["tenant"])


def downgrade() -> None:
    """Drop the table (limits then start from full buckets)."""
    op.drop_index("ix_charter_budgets_tenant", table_name="charter_budgets")
    op.drop_table("charter_budgets")
