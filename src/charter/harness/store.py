"""Session records and where they are kept: the ``SessionStore`` protocol and two stores.

A paused session is one small, versioned JSON record: the transcript, and for the step
that paused, each call's id, tool, arguments, invocation id, ledger request id, status
and open interaction. Every write is a compare-and-set on ``revision``, which is what
makes a double, concurrent or post-restart resume execute a tool once.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, JsonValue

from ..outcome import Interaction, InteractionRequired
from .messages import Message, ToolCall, ToolResult

__all__ = (
    "RECORD_VERSION",
    "CallRecord",
    "MemorySessionStore",
    "PendingStep",
    "ResumeRecord",
    "SessionRecord",
    "SessionStore",
    "SqliteSessionStore",
)

RECORD_VERSION = 2
"""The schema version of ``SessionRecord``; a store refuses records it does not know.

Version 2 keeps the host's pause (``CallRecord.paused``) instead of the controls to send.
"""


class ResumeRecord(BaseModel):
    """The decision or answer a paused call resumes with (``ctx.resume``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    interaction_id: str
    kind: Literal["approval", "response"]
    approved: bool | None = None
    value: JsonValue = None
    token: JsonValue = None


class CallRecord(BaseModel):
    """One tool call of the step in flight, in the model's order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call: ToolCall
    """The call as the model made it."""
    tool_name: str
    args: dict[str, JsonValue] | None = None
    """The sealed arguments (None for calls that never sealed)."""
    invocation_id: str | None = None
    request_id: str | None = None
    """The ledger request id (a UUID derived from the session and invocation ids)."""
    middleware_id: str = "host"
    slot: str = "registry"
    status: Literal["pending", "interaction", "deferred", "settled"]
    phase: Literal["before", "execute"] = "execute"
    interaction: Interaction | None = None
    gate: Literal["approval", "confirmation"] | None = None
    """Set when the host's action gate (not the tool) asked for the interaction."""
    token: JsonValue = None
    resume: ResumeRecord | None = None
    """The person's decision or answer, to continue ``paused`` with on the next run."""
    paused: InteractionRequired | None = None
    """What the host answered when the call paused; ``Host.resume`` continues it."""
    result: ToolResult | None = None


class PendingStep(BaseModel):
    """The model step whose tool calls are not all settled yet."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_id: str
    step_id: str
    step: int
    """How many model steps the turn has taken, this one included."""
    calls: tuple[CallRecord, ...]


class SessionRecord(BaseModel):
    """Everything a harness needs to continue a session, in any process."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = RECORD_VERSION
    session_id: str
    subject: str
    """The principal the session belongs to (``anonymous`` when none)."""
    tenant_id: str
    revision: int = 0
    """Bumped on every write; writes are compare-and-set on it."""
    status: Literal["idle", "running", "paused"] = "idle"
    lease_until: datetime | None = None
    """While ``running``: until when this run holds the session (others get a conflict)."""
    messages: tuple[Message, ...] = ()
    pending: PendingStep | None = None
    updated_at: datetime


class SessionStore(Protocol):
    """Protocol: keeps session records; every write is a compare-and-set on ``revision``."""

    async def load(self, session_id: str) -> SessionRecord | None:
        """Read the current record, or None for a new session."""
        ...

    async def save(self, record: SessionRecord, *, expected_revision: int | None) -> bool:
        """Write ``record`` if the stored revision is ``expected_revision`` (None: absent).

        Returns False, writing nothing, when another writer got there first.
        """
        ...


class MemorySessionStore:
    """Keeps records in a dict (one process; not durable). Shared by tests.

    Records are frozen models, so they are kept as they are, not serialised; a durable
    store writes ``record.model_dump_json()``.
    """

    def __init__(self) -> None:
        """Create an empty store."""
        self._records: dict[str, SessionRecord] = {}

    async def load(self, session_id: str) -> SessionRecord | None:
        """Read the current record."""
        return self._records.get(session_id)

    async def save(self, record: SessionRecord, *, expected_revision: int | None) -> bool:
        """Compare-and-set on the revision (the dict update cannot interleave in asyncio)."""
        current = self._records.get(record.session_id)
        if (current.revision if current is not None else None) != expected_revision:
            return False
        self._records[record.session_id] = record
        return True


class SqliteSessionStore:
    """Keeps records in a SQLite file (standard library only); survives restarts.

    Each write is one ``UPDATE ... WHERE revision = ?`` (or an ``INSERT`` for a new
    session), so two processes sharing the file cannot both win a compare-and-set.
    """

    def __init__(self, path: str | Path) -> None:
        """Open (and create, if needed) the database at ``path``."""
        self._path = str(path)
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS charter_sessions ("
                " session_id TEXT PRIMARY KEY, revision INTEGER NOT NULL,"
                " version INTEGER NOT NULL, record TEXT NOT NULL)"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self._path, timeout=5.0, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    async def load(self, session_id: str) -> SessionRecord | None:
        """Read the current record."""
        return await asyncio.to_thread(self._load, session_id)

    async def save(self, record: SessionRecord, *, expected_revision: int | None) -> bool:
        """Compare-and-set on the revision, in one statement."""
        return await asyncio.to_thread(self._save, record, expected_revision)

    def _load(self, session_id: str) -> SessionRecord | None:
        db = self._connect()
        try:
            row = db.execute(
                "SELECT record FROM charter_sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        finally:
            db.close()
        return SessionRecord.model_validate_json(row[0]) if row is not None else None

    def _save(self, record: SessionRecord, expected_revision: int | None) -> bool:
        db = self._connect()
        try:
            text = record.model_dump_json()
            if expected_revision is None:
                cursor = db.execute(
                    "INSERT OR IGNORE INTO charter_sessions VALUES (?, ?, ?, ?)",
                    (record.session_id, record.revision, record.version, text),
                )
            else:
                cursor = db.execute(
                    "UPDATE charter_sessions SET revision = ?, version = ?, record = ?"
                    " WHERE session_id = ? AND revision = ?",
                    (record.revision, record.version, text, record.session_id, expected_revision),
                )
            return cursor.rowcount == 1
        finally:
            db.close()
