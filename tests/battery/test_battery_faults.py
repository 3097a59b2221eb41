"""Reliability battery, faults the database and the outside world inject (reliability.md §5.2
K03, K04, K06, and §5.5 T07).

- K03: PostgreSQL ends the call's connection (``pg_terminate_backend`` from an admin
  connection) while the call is inside its transaction, after the handler wrote; and a
  backend ends itself during the call's COMMIT (a deferred constraint trigger).
- K04: the PostgreSQL server restarts (``pg_ctlcluster … restart -m immediate``) under
  200 requests from 16 client threads that retry with the same request ids.
- K06: an external effect made safe by a key derived from the request id, across a crash
  after the external call and before the local commit, and ``ctx.wait_until``.
- T07: the audit event commits with the action or not at all, across real crashes.

K03 and K04 need a PostgreSQL server (K04 one this machine runs and may restart); they
skip when there is none, and fail under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import sqlalchemy as sa
from _transports import AGENT, prepare_travel, travel_site
from battery_support import (
    ALICE,
    EFFECTS,
    LEDGER,
    Clock,
    EnvFactory,
    Observer,
    SimulatedCrash,
    battery_host,
    completed,
    create_tables,
    effects,
    rid,
    widget,
)
from pydantic import BaseModel, ConfigDict
from tests.builders import tiered_tool
from tests.store.conftest import POSTGRES_URL, SqlStoreFactory, postgres_schema, require_postgres

from charter import ErrorCode, Failed, Registry, ToolContext
from charter.host import Host
from charter.store import SqlStore

# Only K03 and K04 are `serial` (run alone after the parallel run of `make test`): they end
# PostgreSQL connections and restart the server. K06 and T07 crash only their own process or
# child, on a database of their own, so they run in parallel like the crash tests.
pytestmark = pytest.mark.anyio

AUDIT = "charter_audit_events"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL schema (skips without a server; fails under ``CI=true``)."""
    require_postgres()
    with postgres_schema() as url:
        yield url


def fail_or_skip(reason: str) -> None:
    """Skip the test, or fail it under ``CI=true`` (a skipped fault test hides nothing)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


# -- K03 --------------------------------------------------------------------------------------


@dataclass
class Terminator:
    """At ``after_mutation``, ends the call's own PostgreSQL backend from an admin connection."""

    armed: bool = True
    backend: int | None = None
    terminated: list[int] = field(default_factory=list)

    async def remember_backend(self, ctx: ToolContext) -> None:
        """Run by the handler, in the call's transaction: which backend serves it."""
        assert ctx.db is not None
        self.backend = int((await ctx.db.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())

    def __call__(self, point: str) -> None:
        if point != "after_mutation" or not self.armed or self.backend is None:
            return
        self.armed = False
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            # The second argument waits (up to 10 s) until the backend has exited.
            row = admin.execute(
                "SELECT pg_terminate_backend(%s, 10000)", (self.backend,)
            ).fetchone()
        assert row is not None and row[0] is True
        self.terminated.append(self.backend)


async def killed_mid_transaction(pg_url: str) -> tuple[Failed, Observer, Host, dict[str, Any]]:
    """Make one call whose connection PostgreSQL ends after the handler wrote."""
    store = SqlStore(pg_url)
    await store.open()
    terminator = Terminator()
    battery, host = await battery_host(store, clock=Clock(), fault_hook=terminator)
    battery.after_write = terminator.remember_backend
    observer = Observer(pg_url)
    arguments = widget("k03", rid())
    outcome = await host.invoke("create_widget", arguments, ALICE)
    assert terminator.terminated, "the fault point was not reached"
    assert isinstance(outcome, Failed), outcome
    return outcome, observer, host, arguments


@pytest.mark.serial
async def test_K03_connection_killed_mid_transaction_leaves_nothing_and_the_retry_runs_once(
    pg_url: str,
) -> None:
    outcome, observer, host, arguments = await killed_mid_transaction(pg_url)
    try:
        # The server discarded the transaction with the connection: no effect, no row.
        assert await observer.count(EFFECTS) == 0
        assert await observer.count(LEDGER) == 0
        # The pool replaces the dead connection; the retry runs once, then replays.
        first = completed(await host.invoke("create_widget", arguments, ALICE))
        again = completed(await host.invoke("create_widget", arguments, ALICE))
        assert not first.replayed and again.replayed and again.output == first.output
        assert await observer.count(EFFECTS) == 1
        assert await observer.count(LEDGER) == 1
        # What the caller was told says nothing about the database.
        assert "psycopg" not in outcome.message and "terminat" not in outcome.message
    finally:
        await host.aclose()
        await observer.aclose()


@pytest.mark.serial
async def test_K03_connection_killed_mid_transaction_is_a_retryable_error(pg_url: str) -> None:
    outcome, observer, host, _ = await killed_mid_transaction(pg_url)
    try:
        # The transaction certainly did not commit (the connection died before COMMIT):
        # the store says "unavailable", not "failed", and the caller is told to retry.
        assert outcome.code is ErrorCode.PROVIDER_UNAVAILABLE, outcome
        assert outcome.retryable, outcome
        assert outcome.reason == "store_unavailable", outcome
        assert "nothing was stored" in outcome.message
    finally:
        await host.aclose()
        await observer.aclose()


LOST_AT_COMMIT = (
    "CREATE SEQUENCE battery_lost_at_commit_budget",
    """
    CREATE FUNCTION battery_lost_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      -- The backend ends itself while COMMIT runs this deferred trigger (once: sequences
      -- are not transactional), so the client loses the connection during its COMMIT.
      IF NEW.detail = 'lost-at-commit' AND nextval('battery_lost_at_commit_budget') = 1 THEN
        PERFORM pg_terminate_backend(pg_backend_pid());
      END IF;
      RETURN NULL;
    END $$
    """,
    """
    CREATE CONSTRAINT TRIGGER battery_lost_at_commit AFTER INSERT ON battery_effects
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION battery_lost_at_commit()
    """,
)


@pytest.mark.serial
async def test_K03_a_connection_lost_during_commit_is_retryable_and_says_it_may_have_committed(
    pg_url: str,
) -> None:
    store = SqlStore(pg_url)
    await store.open()
    _, host = await battery_host(store, clock=Clock())
    observer = Observer(pg_url)
    try:
        for statement in LOST_AT_COMMIT:
            await observer.execute(statement)
        arguments = widget("lost-at-commit", rid())
        outcome = await host.invoke("create_widget", arguments, ALICE)
        # Charter cannot know whether the COMMIT took effect: it must not say "nothing
        # happened", and the retry with the same request id is what makes it safe.
        assert isinstance(outcome, Failed), outcome
        assert outcome.code is ErrorCode.PROVIDER_UNAVAILABLE, outcome
        assert outcome.retryable and outcome.reason == "commit_outcome_unknown", outcome
        assert "may or may not" in outcome.message and "nothing was stored" not in outcome.message
        # Whichever it was, the retries end with exactly one effect and one ledger row.
        for _ in range(5):
            retried = await host.invoke("create_widget", arguments, ALICE)
            if not isinstance(retried, Failed):
                break
            assert retried.retryable, retried
        first = completed(retried)
        again = completed(await host.invoke("create_widget", arguments, ALICE))
        assert again.replayed and again.output == first.output
        assert await observer.count(EFFECTS) == 1
        assert await observer.count(LEDGER) == 1
    finally:
        await host.aclose()
        await observer.aclose()


# -- K04 --------------------------------------------------------------------------------------

K04_REQUESTS = 200
K04_THREADS = 16
K04_DEADLINE = 180.0
"""Seconds every request has to reach a definitive answer, restarts included."""


@dataclass(frozen=True)
class Cluster:
    """The local PostgreSQL cluster the test database lives on, which the test restarts."""

    version: str
    name: str = "main"

    def ctl(self, action: str, *options: str) -> subprocess.CompletedProcess[str]:
        command = ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name]
        return subprocess.run(
            [*command, action, *options],
            capture_output=True,
            text=True,
            # pg_ctl gives up waiting for the start after PGCTLTIMEOUT (60 s by default) and
            # exits 1 though the server goes on recovering; on a loaded machine it can be slower.
            env={**os.environ, "PGCTLTIMEOUT": "150"},
            timeout=180,
            check=False,
        )

    def restart(self) -> None:
        done = self.ctl("restart", "-m", "immediate")
        assert done.returncode == 0, done.stderr

    def checkpoint(self) -> None:
        """Flush the server's pages: recovery after an immediate stop replays only later WAL.

        Without it, a restart after the rest of the suite replays minutes of its writes; on a
        loaded machine that took longer than ``pg_ctl`` waits.
        """
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute("CHECKPOINT")

    def ensure_up(self) -> None:
        """Start the cluster if it is down; wait until it accepts connections again."""
        if self.ctl("status").returncode != 0:
            self.ctl("start")
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(POSTGRES_URL, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # waiting for a server to come up: nothing to wait on


def local_cluster() -> Cluster:
    """The cluster serving the test database, if this process may restart it."""
    require_postgres()
    if shutil.which("pg_lsclusters") is None or shutil.which("pg_ctlcluster") is None:
        fail_or_skip("K04 restarts PostgreSQL with pg_ctlcluster, which is not installed")
    if os.geteuid() != 0:
        fail_or_skip("K04 restarts PostgreSQL with pg_ctlcluster, which needs root")
    url = sa.make_url(POSTGRES_URL)
    if url.host not in ("127.0.0.1", "localhost", "::1"):
        fail_or_skip(f"the test database is on {url.host}, not on this machine")
    listed = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=False
    ).stdout
    for line in listed.splitlines():
        version, name, port, *_ = line.split()
        if int(port) == (url.port or 5432):
            return Cluster(version=version, name=name)
    fail_or_skip(f"no local cluster listens on port {url.port or 5432}")
    raise AssertionError("unreachable")


def postmaster_started() -> str:
    with psycopg.connect(POSTGRES_URL) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()::text").fetchone()
    assert row is not None
    return str(row[0])


class Phases:
    """Seconds each step of K04 took, for its output: on a loaded machine it can be slow."""

    def __init__(self) -> None:
        self.started = self.last = time.monotonic()
        self.steps: list[str] = []

    def mark(self, step: str) -> None:
        now = time.monotonic()
        self.steps.append(f"{step} +{now - self.last:.1f} s")
        self.last = now

    def __str__(self) -> str:
        return f"{', '.join(self.steps)} ({self.last - self.started:.1f} s in all)"


@dataclass
class Answer:
    index: int
    trip_id: str
    replayed: bool
    attempts: int


class Load:
    """200 trips.create calls from 16 threads, each retried until it is answered 200."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.key = key
        self.request_ids = [str(uuid.uuid4()) for _ in range(K04_REQUESTS)]
        self.answered = 0
        self.lock = threading.Lock()
        self.progress = threading.Condition(self.lock)
        self.refusals: list[str] = []
        self.local = threading.local()
        self.clients: list[httpx.Client] = []

    def client(self) -> httpx.Client:
        """This thread's client (one connection pool per thread, closed by ``close``)."""
        client: httpx.Client | None = getattr(self.local, "client", None)
        if client is None:
            client = httpx.Client(
                base_url=self.url, timeout=30, headers={"Authorization": f"Bearer {self.key}"}
            )
            self.local.client = client
            with self.lock:
                self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def call(self, index: int, deadline: float) -> Answer:
        body = {
            "name": f"k04-{index}",
            "destination": "Reykjavik",
            "nights": 1,
            "_charter": {"requestId": self.request_ids[index]},
        }
        attempts = 0
        while time.monotonic() < deadline:
            attempts += 1
            try:
                response = self.client().post("/v1/tools/trips.create:call", json=body)
            except httpx.TransportError as exc:
                self.note(f"{index}: {type(exc).__name__}")
                continue
            if response.status_code == 200:
                with self.progress:
                    self.answered += 1
                    self.progress.notify_all()
                output = response.json()
                return Answer(index, output["output"]["id"], output["replayed"], attempts)
            # Not an answer yet: the server is restarting (500/503) or still running the
            # first attempt (409). The same request id makes the retry safe.
            assert response.status_code in (409, 500, 503, 504), response.text
            self.note(f"{index}: {response.status_code} {response.json().get('code')}")
            time.sleep(0.05)  # a client's retry pause
        raise AssertionError(f"request {index} got no answer in {K04_DEADLINE} s")

    def note(self, refusal: str) -> None:
        with self.lock:
            self.refusals.append(refusal)

    def wait_for(self, answered: int) -> None:
        with self.progress:
            self.progress.wait_for(lambda: self.answered >= answered, timeout=K04_DEADLINE)


@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(400)
def test_K04_restart_under_load_every_request_ends_with_exactly_one_effect(
    tmp_path: Path,
) -> None:
    cluster = local_cluster()
    with postgres_schema() as url:
        keys = asyncio.run(prepare_travel(url, tmp_path / "keys.json"))
        before = postmaster_started()
        phases = Phases()
        cluster.checkpoint()
        phases.mark("checkpoint")
        try:
            with travel_site(url, keys) as site:
                phases.mark("server started")
                load = Load(site.url, keys[AGENT])
                deadline = time.monotonic() + K04_DEADLINE
                try:
                    with ThreadPoolExecutor(K04_THREADS) as pool:
                        futures = [pool.submit(load.call, i, deadline) for i in range(K04_REQUESTS)]
                        for threshold in (K04_REQUESTS // 4, K04_REQUESTS // 2):
                            load.wait_for(threshold)
                            phases.mark(f"{threshold} answered")
                            cluster.restart()
                            phases.mark("restarted")
                        answers = [future.result() for future in futures]
                        phases.mark("all answered")
                finally:
                    load.close()
        finally:
            cluster.ensure_up()
        after = postmaster_started()
        rows = asyncio.run(trips_by_name(url, "k04-%"))
        ledger = asyncio.run(count(url, "SELECT count(*) FROM charter_ledger_entries"))
    assert after != before, "the server was not restarted"
    # Every request was answered, and has exactly one effect: its trip, the one it was told.
    assert sorted(a.index for a in answers) == list(range(K04_REQUESTS))
    assert len(rows) == K04_REQUESTS, f"{len(rows)} names for {K04_REQUESTS} requests"
    for answer in answers:
        assert rows[f"k04-{answer.index}"] == [answer.trip_id], answer
    assert ledger == K04_REQUESTS
    print(f"K04: {len(load.refusals)} refused attempts during the restarts; {phases}")


async def trips_by_name(url: str, pattern: str) -> dict[str, list[str]]:
    observer = Observer(url)
    try:
        async with observer.engine.connect() as conn:
            result = await conn.execute(
                sa.text("SELECT name, id FROM travel_trips WHERE name LIKE :p ORDER BY id"),
                {"p": pattern},
            )
            rows: dict[str, list[str]] = {}
            for name, trip_id in result:
                rows.setdefault(str(name), []).append(str(trip_id))
            return rows
    finally:
        await observer.aclose()


async def count(url: str, sql: str) -> int:
    observer = Observer(url)
    try:
        async with observer.engine.connect() as conn:
            return int((await conn.execute(sa.text(sql))).scalar_one())
    finally:
        await observer.aclose()


# -- K06 --------------------------------------------------------------------------------------


class Downstream:
    """A fake payment provider outside the database, honouring idempotency keys.

    It records every call it receives and executes a key once (as Stripe does); nothing
    here rolls back with the caller's transaction.
    """

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.charges: dict[str, str] = {}
        self.notified: list[str] = []

    async def charge(self, key: str, amount: int) -> str:
        self.calls.append(key)
        if key not in self.charges:
            self.charges[key] = f"ch_{len(self.charges) + 1}_{amount}"
        return self.charges[key]

    async def notify(self, key: str) -> None:
        self.notified.append(key)


class Charge(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: str
    amount: int


class Charged(BaseModel):
    charge_id: str
    order_id: str


def charge_registry(downstream: Downstream) -> Registry:
    """``charge_card``: charge the provider under a derived key, record it, notify after commit."""

    async def charge_card(command: Charge, ctx: ToolContext) -> Charged:
        assert ctx.db is not None and ctx.request_id is not None
        # The key is derived from the request id, so every retry of this action sends it.
        key = f"{ctx.tenant_id}:{ctx.request_id}:charge"
        charge_id = await downstream.charge(key, command.amount)
        await ctx.db.execute(
            sa.insert(effects).values(
                id=f"{charge_id}:{uuid.uuid4().hex}",
                tenant_id=ctx.tenant_id,
                request_id=ctx.request_id,
                tool="charge_card",
                detail=charge_id,
            )
        )
        # The receipt goes out only once the charge is recorded here.
        ctx.wait_until(lambda: downstream.notify(f"{key}:notify"))
        return Charged(charge_id=charge_id, order_id=command.order_id)

    registry = Registry()
    charge = tiered_tool(
        "charge_card", "write", charge_card, Charge, Charged, required_scopes=["orders:refund"]
    )
    registry.register(charge)
    return registry


class CrashOnce:
    """A fault hook: the process 'dies' at ``point`` the first time it gets there."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.armed = True

    def __call__(self, reached: str) -> None:
        if self.armed and reached == self.point:
            self.armed = False
            raise SimulatedCrash(reached)


async def charge_env(store: SqlStore, point: str) -> tuple[Host, Downstream]:
    await create_tables(store)
    downstream = Downstream()
    host = Host(charge_registry(downstream), store=store, fault_hook=CrashOnce(point))
    return host, downstream


@pytest.mark.parametrize("point", ["after_mutation", "before_commit"])
async def test_K06_the_retry_after_a_crash_before_the_commit_reuses_the_derived_key(
    make_sql_store: SqlStoreFactory, observer: Observer, point: str
) -> None:
    host, downstream = await charge_env(await make_sql_store(), point)
    request_id = rid()
    key = f"acme:{request_id}:charge"
    arguments = {"order_id": "o-1", "amount": 500, "_charter": {"requestId": request_id}}
    with pytest.raises(SimulatedCrash):
        await host.invoke("charge_card", arguments, ALICE)
    # The provider charged; the local record rolled back with the process; no receipt.
    assert downstream.calls == [key] and list(downstream.charges) == [key]
    assert downstream.notified == []
    assert await observer.count(EFFECTS) == 0 and await observer.count(LEDGER) == 0
    first = completed(await host.invoke("charge_card", arguments, ALICE))
    again = completed(await host.invoke("charge_card", arguments, ALICE))
    # The retry called the provider again with the same key: the card was charged once,
    # and the charge the caller sees is that one.
    assert downstream.calls == [key, key]
    assert downstream.charges == {key: "ch_1_500"}
    assert first.output == {"charge_id": "ch_1_500", "order_id": "o-1"}
    assert not first.replayed and again.replayed and again.output == first.output
    assert await observer.effect_ids(request_id=request_id) != []
    assert await observer.count(EFFECTS) == 1
    entry = await observer.entry(request_id)
    assert entry is not None and entry["status"] == "completed"
    # The receipt went out once, after the commit; the replay sent nothing.
    assert downstream.notified == [f"{key}:notify"]


async def test_K06_wait_until_work_is_at_most_once_a_crash_after_the_commit_loses_it(
    make_sql_store: SqlStoreFactory, observer: Observer
) -> None:
    # The documented limit (docs/ledger.md): wait_until work is not persisted. A process
    # that dies after the commit, before the work runs, loses it; the retry replays the
    # stored outcome and does not run the handler, so nothing sends it again.
    host, downstream = await charge_env(await make_sql_store(), "after_commit_before_response")
    request_id = rid()
    arguments = {"order_id": "o-2", "amount": 700, "_charter": {"requestId": request_id}}
    with pytest.raises(SimulatedCrash):
        await host.invoke("charge_card", arguments, ALICE)
    replay = completed(await host.invoke("charge_card", arguments, ALICE))
    assert replay.replayed
    assert len(downstream.calls) == 1 and await observer.count(EFFECTS) == 1
    assert downstream.notified == []


# -- T07 --------------------------------------------------------------------------------------

CHILD = Path(__file__).with_name("crash_child.py")
"""The battery's crash child (see its docstring): one call as ALICE, then ``os._exit(3)``."""


async def crash_child(store_url: str, point: str, arguments: dict[str, Any], clock: Clock) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        store_url,
        point,
        "exit",
        "create_widget",
        json.dumps(arguments),
        clock().isoformat(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(90):
        out, err = await process.communicate()
    assert process.returncode == 3, (process.returncode, out.decode(), err.decode())


@pytest.mark.slow
@pytest.mark.parametrize(
    "point", ["after_claim", "after_mutation", "before_commit", "after_commit_before_response"]
)
async def test_T07_the_audit_event_commits_with_the_effect_or_not_at_all(
    make_env: EnvFactory, observer: Observer, store_url: str, point: str
) -> None:
    env = await make_env(in_progress_wait=30)
    request_id = rid()
    arguments = widget("t07", request_id)
    # A real process makes the call and dies at the point: after the handler wrote its
    # effect and before the gate wrote the audit row (after_mutation), after both but
    # before the commit (before_commit), or after the commit.
    await crash_child(store_url, point, arguments, env.clock)
    committed = point == "after_commit_before_response"
    effects_seen = await observer.count(EFFECTS, request_id=request_id)
    audited = await observer.count(AUDIT, request_id=request_id)
    assert (effects_seen, audited) == ((1, 1) if committed else (0, 0))
    assert await observer.count(LEDGER, request_id=request_id) == effects_seen
    # The retry: the action (and its audit event) once in all, plus a replay's event.
    outcome = completed(await env.host.invoke("create_widget", arguments, ALICE))
    assert outcome.replayed is committed
    assert await observer.count(EFFECTS, request_id=request_id) == 1
    events = await audit_events(observer, request_id)
    assert [e["replayed"] for e in events] == ([False, True] if committed else [False])
    assert all(e["outcome"] == "completed" and e["tool"] == "create_widget" for e in events)


async def audit_events(observer: Observer, request_id: str) -> list[dict[str, Any]]:
    """The committed audit events of a request, oldest first, as their JSON."""
    async with observer.engine.connect() as conn:
        result = await conn.execute(
            sa.text(f"SELECT event FROM {AUDIT} WHERE request_id = :r ORDER BY seq"),
            {"r": request_id},
        )
        return [json.loads(row[0]) for row in result]
