"""Reliability battery, ledger core (reliability.md §5.1, L01-L18), on SQLite and PostgreSQL;
its races (L01, L06, L12, L15, L16) are in test_battery_ledger_races.py.

Each test names its row. The tool is real: its handler inserts one ``battery_effects`` row
through ``ctx.db``, so "effects" are committed rows, counted from outside charter by an
``Observer``. Concurrency is real too: one connection per caller, callers released by an
``asyncio.Barrier``, the running handler holding its transaction open until every caller
has called ``invoke`` (``battery_support.burst``). Rows already proven elsewhere are
referenced rather than repeated.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
import sqlalchemy as sa
from battery_support import (
    ALICE,
    AMY,
    APPROVER,
    BORIS,
    EFFECTS,
    LEDGER,
    Battery,
    Clock,
    Env,
    EnvFactory,
    Failure,
    Hold,
    Observer,
    SimulatedCrash,
    approval_id_of,
    battery_host,
    burst,
    completed,
    create_tables,
    effects,
    failure,
    payout,
    payout_detail,
    refund,
    rid,
    widget,
)
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from tests.store.store_records import statements_sent

from charter import ConfigurationError, ErrorCode, Principal
from charter.audit import MemoryAuditSink
from charter.host import Host
from charter.outcome import Completed, Failed, InteractionRequired, ToolOutcome, outcome_adapter
from charter.store import SqlStore

pytestmark = pytest.mark.anyio

# -- L02 ------------------------------------------------------------------------------------


async def test_L02_slow_handler_duplicate_in_progress(
    make_env: EnvFactory, observer: Observer
) -> None:
    # The duplicates' wait is bounded by in_progress_wait: PostgreSQL's lock_timeout on
    # the claim of the running request's key, SQLite's busy timeout on BEGIN IMMEDIATE.
    env = await make_env(pool_size=16, in_progress_wait=0.3)
    request_id = rid()
    hold = Hold(release=asyncio.Event(), reached=asyncio.Event())
    env.battery.hold = hold
    first = asyncio.create_task(env.host.invoke("create_widget", widget("slow", request_id), ALICE))
    async with asyncio.timeout(30):
        await hold.reached.wait()
        duplicates = await burst(
            env.host,
            env.battery,
            [("create_widget", widget("slow", request_id), ALICE)] * 8,
            hold=False,
        )
    # Every duplicate answered while the first call was still running (it is held).
    assert not first.done()
    for outcome in duplicates:
        busy = failure(outcome, ErrorCode.REQUEST_IN_PROGRESS, "request_in_progress")
        assert busy.retryable and busy.meta is not None and busy.meta["requestId"] == request_id
    hold.release.set()
    done = completed(await first)
    env.battery.hold = None
    replay = completed(await env.host.invoke("create_widget", widget("slow", request_id), ALICE))
    assert replay.replayed and replay.output == done.output
    assert await observer.count(EFFECTS) == 1
    assert env.battery.runs == 1


# -- L03 ------------------------------------------------------------------------------------


async def test_L03_exact_replay_returns_stored_result(
    make_env: EnvFactory, store_url: str, observer: Observer
) -> None:
    # Replay without the handler is also tests/store/test_sql_host.py::
    # test_an_exact_replay_returns_the_stored_outcome_without_running_the_handler; this
    # adds the restart: a new store (engine, pool) and a new host on the same database.
    env = await make_env()
    request_id = rid()
    first = completed(await env.host.invoke("create_widget", widget("kept", request_id), ALICE))
    again = completed(await env.host.invoke("create_widget", widget("kept", request_id), ALICE))
    assert not first.replayed
    assert again == first.model_copy(update={"replayed": True})
    await env.host.aclose()
    async with SqlStore(store_url) as reopened:
        battery, host = await battery_host(reopened)
        after = completed(await host.invoke("create_widget", widget("kept", request_id), ALICE))
        assert after == first.model_copy(update={"replayed": True})
        assert battery.runs == 0
    assert env.battery.runs == 1
    assert await observer.count(EFFECTS) == 1


# -- L04 ------------------------------------------------------------------------------------


async def test_L04_replay_canonical_equivalence(make_env: EnvFactory, observer: Observer) -> None:
    # The fingerprint hashes RFC 8785 canonical JSON of the *validated* input, and the
    # request id is a UUID compared in canonical lower-case form.
    env = await make_env()
    request_id = rid()
    first = completed(
        await env.host.invoke("create_widget", widget("same", request_id, size=1), ALICE)
    )
    equivalents: list[object] = [
        {"_charter": {"requestId": request_id}, "size": 1, "name": "same"},  # key order
        f'{{ "name" :"same",\n\t"size": 1 , "_charter":{{ "requestId":"{request_id}" }} }}',
        widget("same", request_id.upper(), size=1),  # the UUID in upper case
        widget("same", request_id.replace("-", ""), size=1),  # the UUID without hyphens
        widget("same", request_id),  # the default left out
        widget("same", request_id, size=1.0),  # the same integer after validation
    ]
    for arguments in equivalents:
        replay = completed(await env.host.invoke("create_widget", arguments, ALICE))
        assert replay == first.model_copy(update={"replayed": True}), arguments
    assert env.battery.runs == 1
    assert await observer.count(EFFECTS) == 1


REPLICA = Path(__file__).with_name("crash_child.py")
"""Run with the fault point ``none``, the crash child is just another replica."""
TAGS = ("pear", "fig", "kiwi", "lime", "plum", "date", "sloe", "yuzu")
"""Enough members that two hash seeds practically never iterate a set in one order."""
PAYOUT_FINGERPRINT = "sha256:6bec49b93b6ac6240fcdd9e24ba6ff8f11d927edec5d98e5a7d286fb7e918d58"
"""SHA-256 of ``{"capabilityId":"send_payout","capabilityVersion":"v1","input":{"amount":100,
"iban":{"$secret":"DE-ORIGINAL"},"memo":"rent","order_id":"o-1","tags":{"$set":["date","fig",
"kiwi","lime","pear","plum","sloe","yuzu"]}},"target":"o-1","tenantId":"acme"}`` (form 1)."""


async def replica(env: Env, store_url: str, seed: int, arguments: dict[str, Any]) -> ToolOutcome:
    """Make one call from another process, with its own ``PYTHONHASHSEED``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(REPLICA),
        store_url,
        "none",
        "exit",
        "send_payout",
        json.dumps(arguments),
        env.clock().isoformat(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONHASHSEED": str(seed)},
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, (process.returncode, out.decode(), err.decode())
    return outcome_adapter.validate_json(out)


async def test_L04_a_set_secret_and_excluded_field_replay_from_any_process(
    make_env: EnvFactory, observer: Observer, store_url: str
) -> None:
    # A set dumps in hash order, which PYTHONHASHSEED changes per process: the fingerprint
    # sorts it, so a retry that lands on another replica (or after a restart) replays.
    env = await make_env()
    request_id = rid()
    arguments = payout("DE-ORIGINAL", request_id, tags=TAGS)
    first = completed(await replica(env, store_url, 1, arguments))
    for seed in (2, 3):
        replay = completed(await replica(env, store_url, seed, arguments))
        assert replay == first.model_copy(update={"replayed": True}), seed
    reordered = payout("DE-ORIGINAL", request_id, tags=sorted(TAGS, reverse=True))
    replay = completed(await env.host.invoke("send_payout", reordered, ALICE))
    assert replay == first.model_copy(update={"replayed": True})
    assert await observer.details() == [payout_detail("DE-ORIGINAL", 100, "rent")]
    # The form is persistent: this exact command has had this fingerprint since form 1.
    entry = await observer.entry(request_id)
    assert entry is not None and entry["fingerprint"] == PAYOUT_FINGERPRINT


# -- L05 ------------------------------------------------------------------------------------


async def test_L05_mismatched_replay_rejected(make_env: EnvFactory, observer: Observer) -> None:
    env = await make_env()
    request_id = rid()
    first = completed(
        await env.host.invoke("create_widget", widget("secret-name-1", request_id), ALICE)
    )
    assert isinstance(first.output, dict)
    stored = await env.store.get_entry("acme", "alice", request_id)
    mismatches: list[tuple[str, dict[str, Any]]] = [
        ("create_widget", widget("secret-name-2", request_id)),  # one argument changed
        ("create_widget", widget("secret-name-1", request_id, size=2)),  # a default changed
        ("rename_widget", widget("secret-name-1", request_id)),  # another tool
    ]
    for name, arguments in mismatches:
        outcome = await env.host.invoke(name, arguments, ALICE)
        conflict = failure(outcome, ErrorCode.IDEMPOTENCY_CONFLICT, "idempotency_key_reused")
        assert not conflict.retryable
        # The error shows neither the stored arguments nor the stored result.
        shown = conflict.model_dump_json()
        assert "secret-name-1" not in shown and str(first.output["widget_id"]) not in shown
    # Another target tenant: create_widget is not delegable, so the call is refused
    # before the ledger. (For a delegable tool the effective tenant is part of the key:
    # the call is another request, L07.)
    other_tenant = widget("secret-name-1", None, _controls={"requestId": request_id})
    other_tenant["_charter"]["onBehalfOf"] = "globex"
    failure(
        await env.host.invoke("create_widget", other_tenant, ALICE),
        ErrorCode.AUTHORIZATION_DENIED,
        "tenant_forbidden",
    )
    assert env.battery.runs == 1
    assert await env.store.get_entry("acme", "alice", request_id) == stored
    assert await observer.count(EFFECTS) == 1


async def test_L05_another_secret_excluded_field_or_set_member_is_a_conflict(
    make_env: EnvFactory, observer: Observer
) -> None:
    # SecretStr dumps as "**********" and exclude=True drops its field: the fingerprint
    # hashes the validated values themselves, so changing either is another command.
    env = await make_env()
    request_id = rid()
    completed(await env.host.invoke("send_payout", payout("DE-ORIGINAL", request_id), ALICE))
    stored = await env.store.get_entry("acme", "alice", request_id)
    for arguments in (
        payout("DE-SWAPPED", request_id),  # the secret
        payout("DE-ORIGINAL", request_id, memo="other"),  # the excluded field
        payout("DE-ORIGINAL", request_id, tags=("b", "a", "c")),  # a set member more
    ):
        outcome = await env.host.invoke("send_payout", arguments, ALICE)
        conflict = failure(outcome, ErrorCode.IDEMPOTENCY_CONFLICT, "idempotency_key_reused")
        assert "DE-" not in conflict.model_dump_json()
    assert await env.store.get_entry("acme", "alice", request_id) == stored
    assert await observer.details() == [payout_detail("DE-ORIGINAL", 100, "rent")]


# -- L07 / L08 ------------------------------------------------------------------------------


async def test_L07_cross_tenant_key_isolation(make_env: EnvFactory, observer: Observer) -> None:
    env = await make_env()
    for boris_name in ("same", "different"):
        request_id = rid()
        alices = completed(
            await env.host.invoke("create_widget", widget("same", request_id), ALICE)
        )
        stored = await env.store.get_entry("acme", "alice", request_id)
        boris = completed(
            await env.host.invoke("create_widget", widget(boris_name, request_id), BORIS)
        )
        # Boris's call ran on its own: not a replay, not a conflict, not Alice's widget.
        assert not boris.replayed and boris.output != alices.output
        assert await env.store.get_entry("acme", "alice", request_id) == stored
        assert await observer.count(EFFECTS, request_id=request_id, tenant_id="globex") == 1
        assert await observer.count(EFFECTS, request_id=request_id, tenant_id="acme") == 1
        status = await env.host.action_status(BORIS, request_id)
        assert status is not None and status.outcome == boris.model_dump(mode="json")


async def test_L08_same_tenant_other_principal(make_env: EnvFactory, observer: Observer) -> None:
    # The documented key is (tenant, principal, request id): a colleague's request id is
    # another request. Amy never sees Alice's outcome, by replay or by status.
    env = await make_env()
    request_id = rid()
    alices = completed(await env.host.invoke("create_widget", widget("w", request_id), ALICE))
    assert await env.host.action_status(AMY, request_id) is None
    amys = completed(await env.host.invoke("create_widget", widget("w", request_id), AMY))
    assert not amys.replayed and amys.output != alices.output
    again = completed(await env.host.invoke("create_widget", widget("w", request_id), AMY))
    assert again.replayed and again.output == amys.output
    assert await observer.count(EFFECTS, request_id=request_id) == 2
    assert await observer.count(LEDGER, request_id=request_id) == 2


# -- L09 ------------------------------------------------------------------------------------


async def test_L09_gate_rejections_not_recorded(make_env: EnvFactory, observer: Observer) -> None:
    # The same rows on the in-memory store: tests/host/test_host_ledger.py
    # (test_a_retry_with_the_same_id_after_*); here on SQL with the handler's own table.
    env = await make_env()
    host = env.host
    unscoped = Principal(subject="alice", tenant_id="acme", scopes=frozenset({"widgets:read"}))

    async def nothing_left() -> None:
        assert await observer.count(LEDGER) == 0
        assert await observer.count(EFFECTS) == 0

    widget_id = rid()
    invalid = widget("w", widget_id, size="big")
    failure(await host.invoke("create_widget", invalid, ALICE), ErrorCode.INVALID_INPUT)
    await nothing_left()
    failure(
        await host.invoke("create_widget", widget("w", widget_id), unscoped),
        ErrorCode.AUTHORIZATION_DENIED,
        "insufficient_scope",
    )
    await nothing_left()
    completed(await host.invoke("create_widget", widget("w", widget_id), ALICE))

    ship_id = rid()
    unconfirmed = {"order_id": "o-1", "_charter": {"requestId": ship_id}}
    asked = await host.invoke("ship_order", unconfirmed, ALICE)
    assert isinstance(asked, InteractionRequired) and asked.gate == "confirmation"
    assert await observer.count(LEDGER, request_id=ship_id) == 0
    confirmed = {"order_id": "o-1", "_charter": {"requestId": ship_id, "confirmed": True}}
    completed(await host.invoke("ship_order", confirmed, ALICE))

    refund_id = rid()
    approval_id = approval_id_of(
        await host.invoke("refund_order", refund("o-2", 5, refund_id), ALICE)
    )
    forged = refund("o-2", 5, refund_id, approval_id="apr_" + uuid.uuid4().hex)
    failure(
        await host.invoke("refund_order", forged, ALICE),
        ErrorCode.AUTHORIZATION_DENIED,
        "not_found",
    )
    early = refund("o-2", 5, refund_id, approval_id=approval_id)
    pending = await host.invoke("refund_order", early, ALICE)
    assert isinstance(pending, InteractionRequired) and pending.approval_status == "pending"
    assert await observer.count(LEDGER, request_id=refund_id) == 0
    assert not isinstance(await host.approvals.grant(approval_id, APPROVER), Failed)
    completed(await host.invoke("refund_order", early, ALICE))

    # Each corrected request ran exactly once.
    assert env.battery.runs == 3
    for request_id in (widget_id, ship_id, refund_id):
        assert await observer.count(EFFECTS, request_id=request_id) == 1
        assert await observer.count(LEDGER, request_id=request_id) == 1


# -- L10 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ("tool_error", ErrorCode.PROVIDER_UNAVAILABLE),
        ("exception", ErrorCode.PROVIDER_ERROR),
        ("bad_output", ErrorCode.INVALID_OUTPUT),
    ],
)
async def test_L10_handler_error_semantics(
    make_env: EnvFactory, observer: Observer, fault: Failure, code: ErrorCode
) -> None:
    # Policy (docs/ledger.md): only completed and deferred outcomes are stored. A handler
    # that fails after writing -- a ToolError, a bug, output that breaks its schema --
    # rolls its writes back and leaves the request id free; the retry runs the handler
    # again, and its completed outcome is what replays from then on.
    env = await make_env()
    request_id = rid()
    env.battery.fail = fault
    failure(await env.host.invoke("create_widget", widget("w", request_id), ALICE), code)
    assert await observer.count(EFFECTS) == 0
    assert await observer.count(LEDGER) == 0
    retried = completed(await env.host.invoke("create_widget", widget("w", request_id), ALICE))
    replay = completed(await env.host.invoke("create_widget", widget("w", request_id), ALICE))
    assert not retried.replayed and replay == retried.model_copy(update={"replayed": True})
    assert env.battery.runs == 2
    assert await observer.count(EFFECTS) == 1


# -- L11 ------------------------------------------------------------------------------------


@asynccontextmanager
async def competing_writer(backend: str, store_url: str, observer: Observer) -> AsyncIterator[None]:
    """Hold, from another connection, the lock a ledgered call's claim needs.

    SQLite: the database write lock (``BEGIN IMMEDIATE`` on a plain connection), which
    the call's own ``BEGIN IMMEDIATE`` then waits for: in WAL mode that is the only place
    a writer meets SQLITE_BUSY, since COMMIT never waits. PostgreSQL: an EXCLUSIVE lock on
    the ledger table, which the claim's INSERT waits for until its lock_timeout (55P03).
    """
    if backend == "sqlite":
        path = sa.make_url(store_url).database
        assert path is not None
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            raw.execute("ROLLBACK")
            raw.close()
        return
    async with observer.engine.connect() as conn:
        await conn.execute(sa.text(f"LOCK TABLE {LEDGER} IN EXCLUSIVE MODE"))
        try:
            yield
        finally:
            await conn.rollback()


async def retry_until_done(host: Host, arguments: dict[str, Any]) -> Completed:
    """What a client does with a retryable outcome: call again with the same request id."""
    for _ in range(5):
        outcome = await host.invoke("create_widget", arguments, ALICE)
        if isinstance(outcome, Completed):
            return outcome
        assert isinstance(outcome, Failed) and outcome.retryable, outcome
    raise AssertionError("still not done after 5 retries")


TRANSIENT_AT_COMMIT = (
    "CREATE SEQUENCE battery_serialization_budget",
    "CREATE SEQUENCE battery_deadlock_budget",
    """
    CREATE FUNCTION battery_transient() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      -- Sequences are not transactional: each error is raised once, the retry passes.
      IF NEW.detail = 'serialization' AND nextval('battery_serialization_budget') = 1 THEN
        RAISE EXCEPTION 'injected' USING ERRCODE = 'serialization_failure';
      END IF;
      IF NEW.detail = 'deadlock' AND nextval('battery_deadlock_budget') = 1 THEN
        RAISE EXCEPTION 'injected' USING ERRCODE = 'deadlock_detected';
      END IF;
      RETURN NULL;
    END $$
    """,
    """
    CREATE CONSTRAINT TRIGGER battery_transient AFTER INSERT ON battery_effects
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION battery_transient()
    """,
)
"""A deferred constraint trigger: PostgreSQL itself fails the COMMIT with 40001 / 40P01."""


async def test_L11_transient_db_errors_retried_not_recorded(
    make_env: EnvFactory, observer: Observer, store_backend: str, store_url: str
) -> None:
    env = await make_env(in_progress_wait=0.3)
    arguments = widget("locked-out", rid())
    async with competing_writer(store_backend, store_url, observer):
        busy = failure(
            await env.host.invoke("create_widget", arguments, ALICE),
            ErrorCode.REQUEST_IN_PROGRESS,
        )
        assert busy.retryable
        assert await observer.count(LEDGER) == 0
    assert await observer.count(EFFECTS) == 0
    await retry_until_done(env.host, arguments)
    assert env.battery.runs == 1

    if store_backend == "postgres":
        for statement in TRANSIENT_AT_COMMIT:
            await observer.execute(statement)
        for detail in ("serialization", "deadlock"):
            arguments = widget(detail, rid())
            outcome = await env.host.invoke("create_widget", arguments, ALICE)
            # The handler ran and wrote; the server refused the COMMIT; nothing is stored.
            assert failure(outcome, ErrorCode.REQUEST_IN_PROGRESS).retryable
            assert await observer.count(EFFECTS, detail=detail) == 0
            assert await observer.count(LEDGER, request_id=arguments["_charter"]["requestId"]) == 0
            done = await retry_until_done(env.host, arguments)
            assert not done.replayed
            assert await observer.count(EFFECTS, detail=detail) == 1
        assert env.battery.runs == 5


async def lock_timeout_in_the_handler(
    env: Env, observer: Observer, backend: str, arguments: dict[str, Any] | None = None
) -> Failed:
    """A call whose handler's own INSERT waits past the lock timeout (PostgreSQL only: on
    SQLite the call holds the database write lock, so its statements never wait)."""
    if backend != "postgres":
        pytest.skip("on SQLite a handler's statements never wait for another writer")
    async with observer.engine.connect() as conn:
        await conn.execute(sa.text(f"LOCK TABLE {EFFECTS} IN EXCLUSIVE MODE"))
        outcome = await env.host.invoke("create_widget", arguments or widget("w", rid()), ALICE)
        await conn.rollback()
    assert isinstance(outcome, Failed), outcome
    return outcome


async def test_L11_a_lock_timeout_in_the_handlers_own_statement_is_not_recorded(
    make_env: EnvFactory, observer: Observer, store_backend: str
) -> None:
    env = await make_env(in_progress_wait=0.3)
    await lock_timeout_in_the_handler(env, observer, store_backend)
    assert await observer.count(LEDGER) == 0
    assert await observer.count(EFFECTS) == 0


async def test_L11_a_lock_timeout_in_the_handlers_own_statement_is_retryable(
    make_env: EnvFactory, observer: Observer, store_backend: str
) -> None:
    env = await make_env(in_progress_wait=0.3)
    arguments = widget("w", rid())
    outcome = await lock_timeout_in_the_handler(env, observer, store_backend, arguments)
    # The store names the handler's 55P03: retryable, and the caller is told nothing stuck.
    busy = failure(outcome, ErrorCode.PROVIDER_UNAVAILABLE, "database_busy")
    assert busy.retryable
    assert "psycopg" not in busy.message and "lock_timeout" not in busy.message
    # The retry with the same request id runs once; then it replays.
    done = await retry_until_done(env.host, arguments)
    assert not done.replayed
    assert await observer.count(EFFECTS) == 1


# -- L13 ------------------------------------------------------------------------------------


async def test_L13_claim_ownership_fencing(make_env: EnvFactory, observer: Observer) -> None:
    # There is no lease to expire and no owner token to check: the claim is an INSERT
    # inside the worker's own transaction, so it is visible to nobody else until it
    # commits, and it vanishes with that transaction. A stale worker therefore has no
    # committed claim to finish, overwrite or delete; all it holds is a connection whose
    # transaction is gone.
    env = await make_env()
    request_id = rid()
    captured: list[Any] = []

    async def capture(ctx: Any) -> None:
        captured.append(ctx.db)

    hold = Hold(release=asyncio.Event(), reached=asyncio.Event())
    env.battery.after_write, env.battery.hold = capture, hold
    stale = asyncio.create_task(env.host.invoke("create_widget", widget("w", request_id), ALICE))
    async with asyncio.timeout(30):
        await hold.reached.wait()
    # While it runs, nobody can see (let alone take over) its claim.
    assert await env.store.get_entry("acme", "alice", request_id) is None
    assert await env.host.action_status(ALICE, request_id) is None
    assert await observer.count(LEDGER) == 0 and await observer.count(EFFECTS) == 0
    # Its caller goes away; the worker's transaction rolls back with it.
    stale.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stale
    env.battery.after_write, env.battery.hold = None, None
    winner = completed(await env.host.invoke("create_widget", widget("w", request_id), ALICE))
    stored = await observer.entry(request_id)
    # The stale worker comes back with its connection: the transaction ended and the
    # connection was closed with it, so it can neither write an effect nor touch the
    # winner's row.
    [zombie] = captured
    assert zombie.closed
    with pytest.raises(sa.exc.SQLAlchemyError):
        await zombie.execute(
            sa.insert(effects).values(id="zombie", tenant_id="acme", tool="t", detail="z")
        )
    with pytest.raises(sa.exc.SQLAlchemyError):
        await zombie.execute(sa.text(f"DELETE FROM {LEDGER}"))
    assert isinstance(winner.output, dict)
    assert await observer.effect_ids() == [winner.output["widget_id"]]
    assert await observer.entry(request_id) == stored


# -- L14 ------------------------------------------------------------------------------------


async def test_L14_retention_and_reaper(make_env: EnvFactory, observer: Observer) -> None:
    env = await make_env(retention=timedelta(hours=24), approval_ttl=timedelta(hours=1))
    host, clock = env.host, env.clock
    request_id = rid()
    first = completed(await host.invoke("create_widget", widget("w", request_id), ALICE))
    clock.advance(timedelta(hours=24) - timedelta(milliseconds=1))
    again = completed(await host.invoke("create_widget", widget("w", request_id), ALICE))
    assert again == first.model_copy(update={"replayed": True})
    # Past the retention period the request id starts a new action (Stripe's rule).
    clock.advance(timedelta(milliseconds=2))
    renewed = completed(await host.invoke("create_widget", widget("w", request_id), ALICE))
    assert not renewed.replayed and renewed.output != first.output
    assert await observer.count(EFFECTS, request_id=request_id) == 2
    assert await observer.count(LEDGER, request_id=request_id) == 1

    # The reaper: expired completed entries and decided approvals go, in batches;
    # pending and approved approvals (a person may still act on them) stay.
    for _ in range(5):
        completed(await host.invoke("create_widget", widget("w", rid()), ALICE))
    approval_id_of(await host.invoke("refund_order", refund("o-pending", 1, rid()), ALICE))
    waiting = approval_id_of(await host.invoke("refund_order", refund("o-ok", 1, rid()), ALICE))
    assert not isinstance(await host.approvals.grant(waiting, APPROVER), Failed)
    consumed_rid = rid()
    consumed = approval_id_of(
        await host.invoke("refund_order", refund("o-done", 1, consumed_rid), ALICE)
    )
    assert not isinstance(await host.approvals.grant(consumed, APPROVER), Failed)
    used = refund("o-done", 1, consumed_rid, approval_id=consumed)
    completed(await host.invoke("refund_order", used, ALICE))
    denied = approval_id_of(await host.invoke("refund_order", refund("o-no", 1, rid()), ALICE))
    assert not isinstance(await host.approvals.deny(denied, APPROVER), Failed)
    assert await observer.count(LEDGER) == 7
    clock.advance(timedelta(hours=25))

    # A call in flight while the reaper runs is not touched: its claim is not committed
    # (nothing in_progress is ever visible) and its outcome is not expired.
    hold = Hold(release=asyncio.Event(), reached=asyncio.Event())
    env.battery.hold = hold
    in_flight = rid()
    running = asyncio.create_task(host.invoke("create_widget", widget("w", in_flight), ALICE))
    async with asyncio.timeout(30):
        await hold.reached.wait()
        reaping = asyncio.create_task(env.store.prune(clock(), batch_size=2))
        hold.release.set()
        deleted = await reaping
        assert not completed(await running).replayed
    env.battery.hold = None
    assert deleted == 7 + 2
    assert await observer.count(LEDGER) == 1
    assert await observer.entry(in_flight) is not None
    assert await observer.count("charter_approvals") == 2
    assert await env.store.get_approval(waiting) is not None

    # A pruned request id starts afresh too.
    fresh = completed(await host.invoke("create_widget", widget("w", request_id), ALICE))
    assert not fresh.replayed
    assert await observer.count(EFFECTS, request_id=request_id) == 3

    # Retention shorter than the approval lifetime is refused at construction.
    with pytest.raises(ConfigurationError, match="retention"):
        Host(env.battery.registry, retention=timedelta(minutes=30))


# -- L17 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_id", "reason"),
    [
        (None, "request_id_required"),
        ("", "invalid_controls"),
        ("not-a-uuid", "invalid_controls"),
        ("7" * 10_000, "invalid_controls"),
        ("6ba7b810-9dad-11d1-80b4-00c04fd430c8\x07", "invalid_controls"),
        ("6ba7b810-9dad-11d1-80b4-00c04fd430c8\x00", "invalid_controls"),
        ("6ba7b810\n-9dad-11d1-80b4-00c04fd430c8", "invalid_controls"),
        (12345, "invalid_controls"),
    ],
)
async def test_L17_request_id_validation(
    make_env: EnvFactory, request_id: object, reason: str
) -> None:
    # The audit sink is in memory here, so "no statement at all" is what proves that the
    # request id is refused before any database access.
    env = await make_env(audit=MemoryAuditSink())
    arguments: dict[str, Any] = {"name": "w"}
    if request_id is not None:
        arguments["_charter"] = {"requestId": request_id}
    with statements_sent(env.store) as sent:
        failure(
            await env.host.invoke("create_widget", arguments, ALICE),
            ErrorCode.INVALID_INPUT,
            reason,
        )
        # A read-only tool needs no request id, and is not ledgered.
        completed(await env.host.invoke("list_widgets", {}, ALICE))
    assert sent == []


# -- L18 ------------------------------------------------------------------------------------


@dataclass
class Known:
    """What the reference model knows about one (tenant, request id)."""

    argument: int
    output: dict[str, Any] | None
    """None when the response was lost (a crash after commit) and no replay showed it yet."""
    expires_at: datetime


RETENTION = timedelta(hours=24)
FAULTS = (None, "before_commit", "after_commit_before_response")


class LedgerMachine(RuleBasedStateMachine):
    """The ledger against a pure-Python model of (tenant, request id) → stored outcome.

    Each example gets its own tenants (a fresh namespace in the shared database), its own
    request ids and its own clock, so examples never see each other's rows.
    """

    runner: ClassVar[asyncio.Runner]
    store: ClassVar[SqlStore]
    examples: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        LedgerMachine.examples += 1
        self.namespace = f"ex{LedgerMachine.examples}_{uuid.uuid4().hex[:6]}"
        self.clock = Clock()
        self.fault: str | None = None
        self.battery = Battery()
        self.host = Host(
            self.battery.registry, store=self.store, clock=self.clock, fault_hook=self.crash_at
        )
        self.principals = {
            t: Principal(subject="p", tenant_id=f"{self.namespace}_{t}", scopes=ALICE.scopes)
            for t in ("a", "b")
        }
        self.request_ids = [rid() for _ in range(5)]
        self.model: dict[tuple[str, int], Known] = {}
        self.executions: dict[tuple[str, int], int] = {}

    def crash_at(self, point: str) -> None:
        if point == self.fault:
            raise SimulatedCrash(point)

    def live(self, key: tuple[str, int]) -> Known | None:
        known = self.model.get(key)
        return known if known is not None and known.expires_at > self.clock() else None

    async def effects_of(self, key: tuple[str, int]) -> list[str]:
        tenant, slot = key
        async with self.store.engine.connect() as conn:
            rows = await conn.execute(
                sa.select(effects.c.id).where(
                    effects.c.tenant_id == self.principals[tenant].tenant_id,
                    effects.c.request_id == self.request_ids[slot],
                )
            )
            return sorted(str(r[0]) for r in rows)

    @rule(
        tenant=st.sampled_from(("a", "b")),
        slot=st.integers(0, 4),
        argument=st.integers(0, 2),
        fault=st.sampled_from(FAULTS),
    )
    def call(self, tenant: str, slot: int, argument: int, fault: str | None) -> None:
        key = (tenant, slot)
        known = self.live(key)
        before = set(self.runner.run(self.effects_of(key)))
        arguments = widget(f"arg{argument}", self.request_ids[slot])
        self.fault = fault
        try:
            outcome: ToolOutcome | None = self.runner.run(
                self.host.invoke("create_widget", arguments, self.principals[tenant])
            )
        except SimulatedCrash:
            outcome = None
        finally:
            self.fault = None
        new = set(self.runner.run(self.effects_of(key))) - before
        if known is not None:
            # A stored request: no execution, so no fault point is ever reached.
            assert new == set()
            if known.argument != argument:
                failure(outcome, ErrorCode.IDEMPOTENCY_CONFLICT, "idempotency_key_reused")
                return
            replay = completed(outcome)
            assert replay.replayed and isinstance(replay.output, dict)
            if known.output is None:  # the first look at a response a crash lost
                assert replay.output["widget_id"] in set(self.runner.run(self.effects_of(key)))
                known.output = replay.output
            assert replay.output == known.output
            return
        if fault == "before_commit":
            assert outcome is None and new == set()
            return
        [effect] = new
        self.executions[key] = self.executions.get(key, 0) + 1
        output: dict[str, Any] | None = None
        if fault is None:
            done = completed(outcome)
            assert not done.replayed and isinstance(done.output, dict)
            assert done.output["widget_id"] == effect
            output = done.output
        else:
            assert outcome is None
        self.model[key] = Known(
            argument=argument,
            output=output,
            expires_at=self.clock() + RETENTION,
        )

    @rule(hours=st.sampled_from((1, 12, 23, 25)))
    def advance(self, hours: int) -> None:
        self.clock.advance(timedelta(hours=hours))

    @rule()
    def prune(self) -> None:
        # Expired rows go; the model already treats them as gone.
        self.runner.run(self.store.prune(self.clock()))

    @invariant()
    def one_effect_per_request_and_retention_period(self) -> None:
        for key in self.model:
            assert len(self.runner.run(self.effects_of(key))) == self.executions[key]


@pytest.mark.slow
def test_L18_model_based_ledger(store_url: str) -> None:
    # One database for the whole run, examples kept apart by their tenants: so it runs
    # on PostgreSQL too, where a fresh schema per example would cost more than the steps.
    with asyncio.Runner() as runner:
        store = SqlStore(store_url)
        runner.run(store.open())
        try:
            runner.run(create_tables(store))

            class Machine(LedgerMachine):
                pass

            Machine.runner, Machine.store = runner, store
            run_state_machine_as_test(
                Machine,
                settings=settings(
                    max_examples=25,
                    stateful_step_count=20,
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow],
                ),
            )
        finally:
            runner.run(store.aclose())
