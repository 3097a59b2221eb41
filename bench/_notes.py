"""The note the benchmarks' ledgered writes save: its models, its risk and its effect row.

``bench_ledger`` (and the cases built on it) and ``load_servers`` save the same note, each
into a table of its own name so that the two never meet in one database.
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from pydantic import BaseModel

from charter import RiskPolicy, ToolContext


class Note(BaseModel):
    """A note to save."""

    text: str


class Saved(BaseModel):
    """The saved note."""

    note_id: str
    text: str


WRITE_RISK = RiskPolicy(destructive=False, reversible=True, dry_run_supported=False)
"""The risk of the benchmarks' note writes: ledgered, undoable, no approval."""


def effects_table(name: str) -> sa.Table:
    """The application's own table named ``name``: one effect row a saved note."""
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("request_id", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
    )


async def insert_effect(table: sa.Table, note: Note, ctx: ToolContext) -> str:
    """Insert ``note``'s effect row into ``table`` through ``ctx.db`` (the call's
    transaction); its id."""
    note_id = uuid.uuid4().hex
    await ctx.db.execute(
        sa.insert(table).values(
            id=note_id, tenant_id=ctx.tenant_id, request_id=ctx.request_id, text=note.text
        )
    )
    return note_id
