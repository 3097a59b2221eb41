"""Create ``charter_stream_events``: the SSE events of resumable MCP streams.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

Written by hand, like the others. One row per event a stateful MCP session's stream sent
(``charter.mcp.SqlEventStore``), kept so a client that reconnects with ``Last-Event-ID``
gets what it missed; rows expire (``charter db prune``) and each stream keeps only its
newest events.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from charter.store.migrations._columns import sequence, texts, times

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table, its event-id key and the indexes replay and pruning use."""
    op.create_table(
        "charter_stream_events",
        sequence(),
        *texts("event_id", "session_id", "stream_id"),
        *texts("message", nullable=True),
        *times("expires_at"),
        sa.PrimaryKeyConstraint("seq", name="pk_charter_stream_events"),
        sa.UniqueConstraint("event_id", name="uq_charter_stream_events_event_id"),
    )
    op.create_index(
        "ix_charter_stream_events_session_id_stream_id_seq",
        "charter_stream_events",
        ["session_id", "stream_id", "seq"],
    )
    op.create_index("ix_charter_stream_events_expires_at", "charter_stream_events", ["expires_at"])


def downgrade() -> None:
    """Drop the table (streams can no longer be resumed from it)."""
    op.drop_index("ix_charter_stream_events_expires_at", table_name="charter_stream_events")
    op.drop_index(
        "ix_charter_stream_events_session_id_stream_id_seq", table_name="charter_stream_events"
    )
    op.drop_table("charter_stream_events")
