"""The events of resumable MCP streams on ``SqlStore`` (SQLite and PostgreSQL): each session's
streams apart, a cap per stream, expiry and pruning; ``charter.mcp.SqlEventStore`` over it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import mcp.types as types
import pytest
from mcp.server.streamable_http import EventMessage
from tests.store.store_records import statements_sent

from charter.mcp import SqlEventStore
from charter.store import SqlStore

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)


@dataclass(frozen=True)
class Row:
    session_id: str
    stream_id: str
    message: str | None
    expires_at: datetime = LATER
    event_id: str = ""

    def __post_init__(self) -> None:
        if not self.event_id:
            object.__setattr__(self, "event_id", uuid.uuid4().hex)


async def append(store: SqlStore, *rows: Row, keep: int = 10) -> list[str]:
    await store.store_stream_events(rows, keep=keep)
    return [row.event_id for row in rows]


async def test_replay_gives_the_later_events_of_the_same_sessions_stream_only(
    sql_store: SqlStore,
) -> None:
    priming, _, _, second = await append(
        sql_store,
        Row("s1", "7", None),
        Row("s2", "7", "other session"),  # the same stream id elsewhere
        Row("s1", "8", "other stream"),
        Row("s1", "7", "mine"),
    )
    assert await sql_store.stream_events_after(session_id="s1", event_id=priming, now=NOW) == (
        "7",
        [(second, "mine")],
    )
    # Another session cannot resume it, whatever it knows of the id.
    assert await sql_store.stream_events_after(session_id="s2", event_id=priming, now=NOW) is None
    assert await sql_store.stream_events_after(session_id="s1", event_id="forged", now=NOW) is None
    assert await sql_store.stream_events_after(session_id="s1", event_id="a\x00", now=NOW) is None


async def test_a_stream_keeps_its_newest_events_and_others_are_untouched(
    sql_store: SqlStore,
) -> None:
    ids = await append(sql_store, *(Row("s1", "get", f"m{i}") for i in range(3)), keep=3)
    ids += await append(sql_store, *(Row("s1", "get", f"m{i}") for i in (3, 4)), keep=3)
    [other] = await append(sql_store, Row("s2", "get", None), keep=3)
    assert await sql_store.stream_events_after(session_id="s1", event_id=ids[0], now=NOW) is None
    assert await sql_store.stream_events_after(session_id="s1", event_id=ids[2], now=NOW) == (
        "get",
        [(ids[3], "m3"), (ids[4], "m4")],
    )
    assert await sql_store.stream_events_after(session_id="s2", event_id=other, now=NOW) == (
        "get",
        [],
    )


async def test_one_batch_trims_each_of_its_streams_with_one_statement(
    sql_store: SqlStore,
) -> None:
    # Handshake-era calls: one stream per request id, the same ids in two sessions.
    # A stream the next batch does not touch, though its session and id both occur there.
    [untouched, *_] = await append(sql_store, *(Row("s1", "2", f"u{i}") for i in range(3)), keep=5)
    streams = [(session, stream) for session in ("s1", "s2") for stream in ("1", "get")]
    streams.append(("s2", "2"))
    with statements_sent(sql_store) as sent:
        first = await append(sql_store, *(Row(s, t, "old") for s, t in streams), keep=2)
        newer = await append(
            sql_store, *(Row(s, t, f"new{i}") for s, t in streams for i in range(2)), keep=2
        )
    deletes = [s for s in sent if s.startswith("DELETE FROM charter_stream_events")]
    assert len(deletes) == 2  # one per batch, not one per stream
    for index, (session, stream) in enumerate(streams):
        # The oldest event of each stream is gone; the newest two are kept.
        assert (
            await sql_store.stream_events_after(session_id=session, event_id=first[index], now=NOW)
            is None
        )
        oldest_kept = newer[2 * index]
        assert await sql_store.stream_events_after(
            session_id=session, event_id=oldest_kept, now=NOW
        ) == (stream, [(newer[2 * index + 1], "new1")])
    replay = await sql_store.stream_events_after(session_id="s1", event_id=untouched, now=NOW)
    assert replay is not None and [text for _, text in replay[1]] == ["u1", "u2"]


async def test_expired_events_replay_nothing_and_prune_deletes_only_them(
    sql_store: SqlStore,
) -> None:
    old, fresh = await append(sql_store, Row("s1", "1", None, expires_at=NOW), Row("s1", "2", None))
    after_expiry = NOW + timedelta(seconds=1)
    assert (
        await sql_store.stream_events_after(session_id="s1", event_id=old, now=after_expiry) is None
    )
    assert await sql_store.prune(after_expiry) == 1
    assert await sql_store.stream_events_after(session_id="s1", event_id=fresh, now=NOW) == (
        "2",
        [],
    )


async def test_an_event_the_database_cannot_hold_is_skipped_alone(sql_store: SqlStore) -> None:
    kept = await sql_store.store_stream_events(
        [Row("s1", "bad\x00id", "x"), Row("s1", "1", None)], keep=10
    )
    assert kept == 1


async def test_the_mcp_event_store_round_trips_messages_written_or_not_yet(
    sql_store: SqlStore,
) -> None:
    events = SqlEventStore(sql_store, max_events_per_stream=5)
    bound = events.for_session("session-a")
    ping = types.JSONRPCRequest(jsonrpc="2.0", id="x\x00y", method="ping")
    note = types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"level": "info", "data": "é"}
    )
    priming = await bound.store_event("3", None)
    first = await bound.store_event("3", ping)
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    assert await bound.replay_events_after(priming, send) == "3"  # from memory: unwritten
    await events.flush()
    second = await bound.store_event("3", note)  # unwritten, after written ones
    assert await bound.replay_events_after(priming, send) == "3"
    assert [(e.event_id, e.message) for e in sent] == [
        (first, ping),
        (first, ping),
        (second, note),
    ]
    await events.flush()
    assert await events.for_session("session-b").replay_events_after(priming, send) is None
    assert await sql_store.stream_events_after(session_id="session-a", event_id=first, now=NOW) == (
        "3",
        [(second, note.model_dump_json(by_alias=True, exclude_unset=True))],
    )
