"""The charter tables, as SQLAlchemy Core metadata (the migrations create the same schema).

Every name starts with ``charter_`` so the tables sit beside an application's own. There
are no foreign keys between charter tables: rows are written in whatever order the gate
needs inside one transaction, and pruning deletes a request's rows together.
"""

from __future__ import annotations

import sqlalchemy as sa

from ._types import JSONText, SafeText, UTCDateTime

__all__ = (
    "VERSION_TABLE",
    "api_keys",
    "approvals",
    "audit_events",
    "budgets",
    "claims",
    "deferred",
    "effects",
    "ledger_entries",
    "metadata",
    "secrets",
    "stream_events",
)

VERSION_TABLE = "charter_alembic_version"
"""Alembic's version table for charter's migrations (apart from the application's own)."""


def _sequence() -> sa.Column[int]:
    """An autoincrement ``seq`` primary key: BIGINT on PostgreSQL, SQLite's rowid alias."""
    return sa.Column(
        "seq",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    )


metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _request_key() -> tuple[sa.Column[str], ...]:
    """The primary key of a row about one request: tenant, principal, request id."""
    return (
        sa.Column("tenant_id", SafeText, primary_key=True),
        sa.Column("principal_id", SafeText, primary_key=True),
        sa.Column("request_id", SafeText, primary_key=True),
    )


def _bound_command() -> tuple[sa.Column[str], ...]:
    """The exact command a row is bound to: the tool at its version, target, fingerprint."""
    return (
        sa.Column("tool", SafeText, nullable=False),
        sa.Column("capability_id", SafeText, nullable=False),
        sa.Column("capability_version", SafeText, nullable=False),
        sa.Column("target", SafeText),
        sa.Column("fingerprint", SafeText, nullable=False),
    )


ledger_entries = sa.Table(
    "charter_ledger_entries",
    metadata,
    *_request_key(),
    *_bound_command(),
    sa.Column("status", SafeText, nullable=False),
    sa.Column("outcome", SafeText),
    sa.Column("approval_id", SafeText),
    sa.Column("invocation_id", SafeText, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
    sa.CheckConstraint("status IN ('in_progress', 'completed', 'deferred')", name="status"),
    sa.Index(None, "status", "expires_at"),
)

approvals = sa.Table(
    "charter_approvals",
    metadata,
    sa.Column("id", SafeText, primary_key=True),
    sa.Column("tenant_id", SafeText, nullable=False),
    sa.Column("requester_id", SafeText, nullable=False),
    sa.Column("request_id", SafeText, nullable=False),
    *_bound_command(),
    sa.Column("arguments", JSONText, nullable=False),
    sa.Column("risk", SafeText, nullable=False),
    sa.Column("reason_code", SafeText),
    sa.Column("status", SafeText, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
    sa.Column("decided_by", SafeText),
    sa.Column("decided_at", UTCDateTime),
    sa.Column("decision_reason", SafeText),
    sa.Column("consumed_by", SafeText),
    sa.Column("history", JSONText, nullable=False, server_default="[]"),
    sa.UniqueConstraint("tenant_id", "requester_id", "request_id"),
    sa.CheckConstraint("status IN ('pending', 'approved', 'denied', 'consumed')", name="status"),
    sa.Index(None, "tenant_id", "status", "created_at"),
    sa.Index(None, "status", "expires_at"),
)

claims = sa.Table(
    "charter_claims",
    metadata,
    *_request_key(),
    sa.Column("capability_id", SafeText, nullable=False),
    sa.Column("fingerprint", SafeText, nullable=False),
    sa.Column("result_reference", SafeText),
    sa.Column("created_at", UTCDateTime, nullable=False),
)

deferred = sa.Table(
    "charter_deferred",
    metadata,
    sa.Column("invocation_id", SafeText, primary_key=True),
    sa.Column("tenant_id", SafeText, nullable=False),
    sa.Column("principal_id", SafeText, nullable=False),
    sa.Column("request_id", SafeText, nullable=False),
    sa.Column("tool", SafeText, nullable=False),
    sa.Column("status", SafeText, nullable=False),
    sa.Column("outcome", SafeText),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("settled_at", UTCDateTime),
    sa.CheckConstraint("status IN ('active', 'settled')", name="status"),
    sa.Index(None, "tenant_id", "principal_id", "request_id"),
)

audit_events = sa.Table(
    "charter_audit_events",
    metadata,
    # ``seq`` orders events recorded within the same clock tick, as the in-memory sink does.
    _sequence(),
    sa.Column("id", sa.Text, nullable=False, unique=True),
    sa.Column("time", UTCDateTime, nullable=False),
    # Search columns hold NUL-free copies; ``event`` holds the exact event as ASCII JSON.
    sa.Column("tenant", sa.Text),
    sa.Column("principal_tenant", sa.Text),
    sa.Column("subject", sa.Text),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("request_id", sa.Text),
    sa.Column("outcome", sa.Text, nullable=False),
    sa.Column("event", JSONText, nullable=False),
    sa.Index(None, "tenant", "time"),
    sa.Index(None, "principal_tenant", "time"),
)

api_keys = sa.Table(
    "charter_api_keys",
    metadata,
    sa.Column("id", SafeText, primary_key=True),
    sa.Column("tenant_id", SafeText, nullable=False),
    sa.Column("subject", SafeText, nullable=False),
    sa.Column("scopes", JSONText, nullable=False),
    sa.Column("kind", SafeText, nullable=False),
    sa.Column("actor", SafeText, nullable=False),
    sa.Column("name", SafeText),
    sa.Column("secret_hash", SafeText, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime),
    sa.Column("revoked_at", UTCDateTime),
    sa.Index(None, "tenant_id"),
)

secrets = sa.Table(
    "charter_secrets",
    metadata,
    sa.Column("name", SafeText, primary_key=True),
    sa.Column("secret", SafeText, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
)
"""Secrets every process on the database shares, created once on first use (``_secrets``)."""

budgets = sa.Table(
    "charter_budgets",
    metadata,
    sa.Column("bucket_key", SafeText, primary_key=True),
    sa.Column("tool", SafeText, nullable=False),
    sa.Column("limit_name", SafeText, nullable=False),
    sa.Column("holder", SafeText, nullable=False),
    sa.Column("tenant", SafeText, nullable=False),
    sa.Column("arrival", sa.Double, nullable=False),
    sa.Column("interval_seconds", sa.Double, nullable=False),
    sa.Column("window_seconds", sa.Double, nullable=False),
    sa.Index(None, "tenant"),
)
"""Rate-limit buckets: one theoretical arrival time (Unix seconds) each (``_budget_rows``)."""

effects = sa.Table(
    "charter_effects",
    metadata,
    sa.Column("key", SafeText, primary_key=True),
    sa.Column("tenant_id", SafeText, nullable=False),
    sa.Column("name", SafeText, nullable=False),
    sa.Column("payload", JSONText, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("request_id", SafeText),
    sa.Column("principal_id", SafeText),
    sa.Column("tool", SafeText),
    sa.Column("status", SafeText, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("max_attempts", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", UTCDateTime, nullable=False),
    sa.Column("lease_until", UTCDateTime),
    sa.Column("leased_by", SafeText),
    sa.Column("last_error", SafeText),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Column("delivered_at", UTCDateTime),
    sa.CheckConstraint("status IN ('pending', 'delivered', 'dead', 'discarded')", name="status"),
    sa.Index(None, "status", "next_attempt_at"),
    sa.Index(None, "tenant_id", "created_at"),
    sa.Index(None, "tenant_id", "request_id"),
)
"""The effect outbox: one row per effect, written in the transaction that asked for it."""

stream_events = sa.Table(
    "charter_stream_events",
    metadata,
    # ``seq`` orders a stream's events; ``event_id`` is the unguessable id clients see.
    _sequence(),
    sa.Column("event_id", SafeText, nullable=False, unique=True),
    sa.Column("session_id", SafeText, nullable=False),
    sa.Column("stream_id", SafeText, nullable=False),
    sa.Column("message", SafeText),
    sa.Column("expires_at", UTCDateTime, nullable=False),
    sa.Index(None, "session_id", "stream_id", "seq"),
    sa.Index(None, "expires_at"),
)
"""The SSE events of resumable MCP streams (``_stream_rows``); ``message`` is the JSON-RPC
message as JSON, NULL for a stream's priming event."""
