"""Create ``charter_secrets``: secrets every process on one database shares.

Revision ID: 0003
Revises: 0002
Create Date: 2027-01-18

Written by hand, like 0001 and 0002. The first row is the key that seals MCP ``requestState``
(``mcp-request-state``), so a confirmation asked by one ``charter serve --stateless``
replica can be answered through another. Rows are created on first use, not here: a
replica inserts one if none exists (``ON CONFLICT DO NOTHING``) and then reads the row
that won, so replicas starting at once agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from charter.store.migrations._columns import texts, times

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table."""
    op.create_table(
        "charter_secrets",
        *texts("name", "secret"),
        *times("created_at"),
        sa.PrimaryKeyConstraint("name", name="pk_charter_secrets"),
    )


def downgrade() -> None:
    """Drop the table (replicas then seal with keys of their own until configured)."""
    op.drop_table("charter_secrets")
