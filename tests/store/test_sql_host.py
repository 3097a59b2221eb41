"""The host end to end on ``SqlStore``: the handler's own writes through ``ctx.db`` commit or
roll back with the ledger, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from pydantic import BaseModel
from tests.builders import DESTRUCTIVE_RISK, tiered_tool
from tests.builders import request_id as new_request_id
from tests.store.conftest import SQLITE_ONLY, SqlStoreFactory
from tests.store.round_trips import wire
from tests.store.store_records import all_at_once, statements_sent

from charter import ActionPolicy, Principal, Registry, ToolContext
from charter.errors import ErrorCode, StoreError, ToolError
from charter.host import Host
from charter.outcome import Completed, Deferred, Failed, InteractionRequired
from charter.policy import CreatedTarget
from charter.risk import RiskTier
from charter.store import SqlStore

pytestmark = pytest.mark.anyio

WRITE = RiskTier.WRITE

CALLERS = 64
ITERATIONS = 3
ALICE = Principal(
    subject="alice", tenant_id="acme", scopes=frozenset({"notes:write", "notes:delete"})
)
BOB = Principal(subject="bob", tenant_id="acme", scopes=frozenset({"charter:approve"}))

app = sa.MetaData()
notes = sa.Table(
    "app_notes",
    app,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("tenant_id", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
)


class NoteIn(BaseModel):
    text: str


class NoteOut(BaseModel):
    note_id: str


class DeleteIn(BaseModel):
    note_id: str


class Deleted(BaseModel):
    deleted: bool


class App:
    """A registry whose handlers write ``app_notes`` through ``ctx.db``, counting runs."""

    def __init__(self) -> None:
        self.runs = 0
        self.remote_finished = 0
        self.remote_saw_cancel: list[bool] = []
        self.fail_next = False
        self.winner_may_commit: anyio.Event | None = None
        self.registry = Registry()
        archive_policy = ActionPolicy(target_type="note", command_target_field="note_id")
        delete_policy = replace(archive_policy, approval="required", confirmation="required")
        imported = CreatedTarget(
            command_target_type="note-import-command", result_reference_type="note"
        )
        import_policy = ActionPolicy(
            target_type="note", target_lifecycle="created", created_target=imported
        )
        write = {"required_scopes": ["notes:write"]}
        self.registry.register_all(
            [
                tiered_tool("create_note", WRITE, self.create_note, NoteIn, NoteOut, **write),
                tiered_tool(
                    "delete_note",
                    RiskTier.DESTRUCTIVE,
                    self.delete_note,
                    DeleteIn,
                    Deleted,
                    risk_policy=DESTRUCTIVE_RISK,
                    required_scopes=["notes:delete"],
                    action_policy=delete_policy,
                ),
                # Creates a note, then runs a statement that outlasts the timeout.
                tiered_tool(
                    "slow_note", WRITE, self.slow_note, NoteIn, NoteOut, timeout=0.3, **write
                ),
                tiered_tool(
                    "archive_note",
                    WRITE,
                    self.delete_note,
                    DeleteIn,
                    Deleted,
                    action_policy=archive_policy,
                    **write,
                ),
                # The handler generates the note's id (a created target).
                tiered_tool(
                    "import_note",
                    WRITE,
                    self.import_note,
                    NoteIn,
                    NoteOut,
                    enforcement="handler",
                    action_policy=import_policy,
                    **write,
                ),
                # Starts an export that finishes later.
                tiered_tool("export_notes", WRITE, self.export_notes, NoteIn, NoteOut, **write),
                # Writes a note, then waits on a remote service its caller must not cut off.
                tiered_tool(
                    "remote_note",
                    WRITE,
                    self.remote_note,
                    NoteIn,
                    NoteOut,
                    cancellable=False,
                    **write,
                ),
            ]
        )

    async def create_note(self, note: NoteIn, ctx: ToolContext) -> NoteOut:
        self.runs += 1
        note_id = "note_" + uuid.uuid4().hex
        await ctx.db.execute(
            sa.insert(notes).values(id=note_id, tenant_id=ctx.tenant_id, text=note.text)
        )
        if self.winner_may_commit is not None:
            await self.winner_may_commit.wait()
        if self.fail_next:
            self.fail_next = False
            raise ToolError(ErrorCode.PROVIDER_UNAVAILABLE, "The note service is down.")
        return NoteOut(note_id=note_id)

    async def slow_note(self, note: NoteIn, ctx: ToolContext) -> NoteOut:
        self.runs += 1
        await ctx.db.execute(sa.insert(notes).values(id="slow", tenant_id="t", text=note.text))
        if ctx.db.dialect.name == "postgresql":
            await ctx.db.execute(sa.text("SELECT pg_sleep(3)"))
        else:  # a few seconds of work in SQLite's own thread
            await ctx.db.execute(
                sa.text(
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                    "LIMIT 30000000) SELECT count(*) FROM c"
                )
            )
        return NoteOut(note_id="slow")

    async def remote_note(self, note: NoteIn, ctx: ToolContext) -> NoteOut:
        self.runs += 1
        note_id = f"remote {note.text}"
        await ctx.db.execute(sa.insert(notes).values(id=note_id, tenant_id="t", text=note.text))
        await anyio.sleep(0.6)  # the remote service's answer
        self.remote_finished += 1
        self.remote_saw_cancel.append(ctx.cancel.is_set())
        return NoteOut(note_id=note_id)

    async def delete_note(self, command: DeleteIn, ctx: ToolContext) -> Deleted:
        self.runs += 1
        result = await ctx.db.execute(sa.delete(notes).where(notes.c.id == command.note_id))
        return Deleted(deleted=result.rowcount == 1)

    async def import_note(self, note: NoteIn, ctx: ToolContext) -> NoteOut:
        assert ctx.handler_action_policy is not None
        claim = await ctx.handler_action_policy.claim()
        if claim.prior is not None:
            return NoteOut(note_id=claim.prior.removeprefix("note:"))
        self.runs += 1
        note_id = "note_" + uuid.uuid4().hex
        await ctx.db.execute(
            sa.insert(notes).values(id=note_id, tenant_id=ctx.tenant_id, text=note.text)
        )
        await claim.record(f"note:{note_id}")
        return NoteOut(note_id=note_id)

    async def export_notes(self, note: NoteIn, ctx: ToolContext) -> Deferred:
        self.runs += 1
        return Deferred()


async def app_host(store: SqlStore, **options: Any) -> tuple[App, Host]:
    async with store.engine.begin() as conn:
        await conn.run_sync(app.create_all)
    application = App()
    return application, Host(application.registry, store=store, **options)


async def rows(store: SqlStore, table: str) -> int:
    async with store.engine.connect() as conn:
        return int((await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one())


def call(text: str, request_id: str | None = None, **controls: Any) -> dict[str, Any]:
    """The arguments of a note call under ``request_id`` (a fresh one when not given)."""
    return {"text": text, "_charter": {"requestId": request_id or new_request_id(), **controls}}


async def test_an_exact_replay_returns_the_stored_outcome_without_running_the_handler(
    sql_store: SqlStore,
) -> None:
    application, host = await app_host(sql_store)
    request_id = str(uuid.uuid4())
    first = await host.invoke("create_note", call("hello", request_id), ALICE)
    again = await host.invoke("create_note", call("hello", request_id), ALICE)
    assert isinstance(first, Completed) and not first.replayed
    assert isinstance(again, Completed) and again.replayed
    assert again.output == first.output
    assert application.runs == 1
    assert await rows(sql_store, "app_notes") == 1
    entry = await sql_store.get_entry("acme", ALICE.key, request_id)
    assert entry is not None and entry.status == "completed"
    # The store is the audit sink: the first call's event committed with the action.
    events = await sql_store.events(tenant="acme")
    assert [(e.request_id, e.outcome, e.replayed) for e in events] == [
        (request_id, "completed", True),
        (request_id, "completed", False),
    ]
    conflict = await host.invoke("create_note", call("other", request_id), ALICE)
    assert isinstance(conflict, Failed) and conflict.code is ErrorCode.IDEMPOTENCY_CONFLICT
    status = await host.action_status(ALICE, request_id)
    assert status is not None and status.status == "completed"


async def test_a_ledgered_call_writes_its_outcome_and_audit_event_in_one_commit(
    sql_store: SqlStore, store_backend: str
) -> None:
    _, host = await app_host(sql_store)
    request_id = str(uuid.uuid4())
    if store_backend == "postgres":
        async with wire(sql_store) as sent:
            assert isinstance(
                await host.invoke("create_note", call("hi", request_id), ALICE), Completed
            )
        # BEGIN goes with the claim, the outcome (its audit event in the same statement)
        # with the COMMIT: three round trips, the handler's insert the one in between.
        assert sent.statements == ["BEGIN", "INSERT", "INSERT", "WITH", "COMMIT"]
        assert sent.round_trips == 3
    else:
        statements: list[str] = []
        commits: list[int] = []

        @sa.event.listens_for(sql_store.engine.sync_engine, "before_cursor_execute")
        def _statement(conn: object, cursor: object, statement: str, *args: object) -> None:
            word = statement.split(None, 1)[0].upper()
            # SQLite's BEGIN IMMEDIATE, and the busy_timeout PRAGMA that precedes it when
            # the pool hands out a connection last used with another wait (which one it
            # hands out depends on timing: seen on a loaded machine).
            if word not in ("BEGIN", "PRAGMA"):
                statements.append(word)

        @sa.event.listens_for(sql_store.engine.sync_engine, "commit")
        def _commit(conn: object) -> None:
            commits.append(1)

        assert isinstance(
            await host.invoke("create_note", call("hi", request_id), ALICE), Completed
        )
        # The claim, the handler's insert, the outcome, then the audit event.
        assert statements == ["INSERT", "INSERT", "UPDATE", "INSERT"]
        assert commits == [1]
    events = await sql_store.events(tenant="acme")
    assert [(e.request_id, e.outcome) for e in events] == [(request_id, "completed")]
    entry = await sql_store.get_entry("acme", ALICE.key, request_id)
    assert entry is not None and entry.status == "completed"


async def test_a_failing_handler_leaves_no_row_in_either_table_and_the_id_free(
    sql_store: SqlStore,
) -> None:
    application, host = await app_host(sql_store)
    request_id = str(uuid.uuid4())
    application.fail_next = True
    failed = await host.invoke("create_note", call("hello", request_id), ALICE)
    assert isinstance(failed, Failed) and failed.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert await rows(sql_store, "app_notes") == 0
    assert await rows(sql_store, "charter_ledger_entries") == 0
    retried = await host.invoke("create_note", call("hello", request_id), ALICE)
    assert isinstance(retried, Completed) and not retried.replayed
    assert application.runs == 2
    assert await rows(sql_store, "app_notes") == 1


ENDINGS = {
    "commit": lambda db: db.commit(),
    "rollback": lambda db: db.rollback(),
    "close": lambda db: db.close(),
    "commit in run_sync": lambda db: db.run_sync(lambda sync: sync.commit()),
}


@pytest.mark.parametrize("ending", ENDINGS)
async def test_a_handler_cannot_end_the_calls_transaction_through_ctx_db(
    sql_store: SqlStore, ending: str
) -> None:
    # Committing would commit the claim too and leave the request id in progress after a
    # failure; rolling back would drop the claim and let later statements run on their own.
    refusals: list[str] = []
    swallow = True

    async def write_then_end(note: NoteIn, ctx: ToolContext) -> NoteOut:
        await ctx.db.execute(sa.insert(notes).values(id=note.text, tenant_id="t", text="x"))
        try:
            await ENDINGS[ending](ctx.db)
        except StoreError as refused:
            refusals.append(str(refused))
            if not swallow:
                raise
        await ctx.db.execute(sa.insert(notes).values(id=note.text + "-2", tenant_id="t", text="x"))
        return NoteOut(note_id=note.text)

    await app_host(sql_store)
    registry = Registry()
    registry.register(tiered_tool("notes.write", WRITE, write_then_end, NoteIn, NoteOut))
    host = Host(registry, store=sql_store)
    principal = Principal(subject="alice", tenant_id="acme", scopes=frozenset())
    swallow = False
    request_id = str(uuid.uuid4())
    failed = await host.invoke("notes.write", call("a", request_id), principal)
    assert isinstance(failed, Failed), failed
    assert await rows(sql_store, "app_notes") == 0
    assert await rows(sql_store, "charter_ledger_entries") == 0
    # A handler that carries on after the refusal commits all of its work, once, with its
    # record; the request id was free for it.
    swallow = True
    done = await host.invoke("notes.write", call("a", request_id), principal)
    assert isinstance(done, Completed) and not done.replayed, done
    assert await rows(sql_store, "app_notes") == 2
    assert await rows(sql_store, "charter_ledger_entries") == 1
    assert len(refusals) == 2
    assert refusals[0].startswith(f"a handler may not {ending.split()[0]} ctx.db")
    assert "begin_nested()" in refusals[0]


async def burst(host: Host, application: App, request_id: str) -> list[object]:
    """``CALLERS`` concurrent identical calls, released together."""
    entered = 0
    everyone_in = anyio.Event()
    # The winner holds its transaction open until every caller has called invoke, so the
    # others really race it (on PostgreSQL they wait on its uncommitted key).
    application.winner_may_commit = everyone_in

    async def caller() -> object:
        nonlocal entered
        entered += 1
        if entered == CALLERS:
            everyone_in.set()
        return await host.invoke("create_note", call("once", request_id), ALICE)

    return await all_at_once(caller, CALLERS, timeout=120)


async def rolled_back_and_usable(store: SqlStore, host: Host, application: App) -> None:
    """Neither the handler's row nor a ledger entry is left, and the next call completes."""
    assert await rows(store, "app_notes") == 0
    assert await rows(store, "charter_ledger_entries") == 0
    done = await host.invoke("create_note", call("after"), ALICE)
    assert isinstance(done, Completed)
    assert application.runs == 2


async def test_a_handler_timed_out_mid_statement_rolls_back_and_the_store_stays_usable(
    sql_store: SqlStore,
) -> None:
    application, host = await app_host(sql_store)
    timed_out = await host.invoke("slow_note", call("slow"), ALICE)
    assert isinstance(timed_out, Failed) and timed_out.code is ErrorCode.TIMEOUT
    await rolled_back_and_usable(sql_store, host, application)


async def test_a_call_cancelled_by_its_caller_mid_statement_rolls_back(
    sql_store: SqlStore,
) -> None:
    # An anyio cancel scope (a transport whose client went away) cancels again at every
    # await, unlike the handler's own timeout.
    application, host = await app_host(sql_store)
    with anyio.fail_after(30):
        with anyio.move_on_after(0.2) as scope:
            await host.invoke("slow_note", call("slow"), ALICE)
    assert scope.cancelled_caught
    await rolled_back_and_usable(sql_store, host, application)


async def test_a_call_its_caller_cannot_cancel_runs_on_commits_and_is_replayed(
    sql_store: SqlStore,
) -> None:
    # cancellable=False: the caller's cancellation (an MCP client's notifications/cancelled)
    # reaches the caller only; the call commits its work and outcome, and is audited.
    application, host = await app_host(sql_store)
    request_id = new_request_id()
    with anyio.fail_after(30):
        with anyio.move_on_after(0.2) as scope:
            await host.invoke("remote_note", call("kept", request_id), ALICE)
        assert scope.cancelled_caught
        # A retry waits for the call still running (its request id is taken), then
        # replays what it committed.
        again = await host.invoke("remote_note", call("kept", request_id), ALICE)
    assert isinstance(again, Completed) and again.replayed, again
    assert again.output == {"note_id": "remote kept"}
    assert application.runs == 1
    assert await rows(sql_store, "app_notes") == 1
    events = await sql_store.events(tenant="acme")
    assert [(e.outcome, e.replayed) for e in events if e.request_id == request_id] == [
        ("completed", True),
        ("completed", False),
    ]


async def test_a_call_its_caller_left_tells_its_handler_through_ctx_cancel(
    sql_store: SqlStore,
) -> None:
    application, host = await app_host(sql_store)
    with anyio.fail_after(30):
        with anyio.move_on_after(0.2):
            await host.invoke("remote_note", call("kept"), ALICE)
        await host.aclose()  # waits for the call to end and commit
    assert application.remote_saw_cancel == [True]


async def test_closing_the_host_waits_for_the_calls_it_cannot_cancel(sql_store: SqlStore) -> None:
    # One call's caller left, the other's still waits for the answer: both end before
    # the store closes.
    application, host = await app_host(sql_store)
    answers: list[object] = []

    async def wait_for_answer() -> None:
        answers.append(await host.invoke("remote_note", call("waited for"), ALICE))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            with anyio.move_on_after(0.2) as scope:
                await host.invoke("remote_note", call("left"), ALICE)
            assert scope.cancelled_caught and application.remote_finished == 0
            tg.start_soon(wait_for_answer)
            await anyio.sleep(0.2)
            await host.aclose()
            assert application.remote_finished == 2
    assert len(answers) == 1 and isinstance(answers[0], Completed)


@SQLITE_ONLY
async def test_a_call_whose_caller_left_before_its_handler_started_does_not_run(
    sql_store: SqlStore,
) -> None:
    # On SQLite a second write waits for the first's lock before its handler starts; its
    # caller leaves meanwhile, so it never runs, and its request id stays free.
    application, host = await app_host(sql_store)
    second = new_request_id()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(host.invoke, "remote_note", call("first"), ALICE)
            await anyio.sleep(0.1)
            with anyio.move_on_after(0.2) as scope:
                await host.invoke("remote_note", call("second", second), ALICE)
            assert scope.cancelled_caught
        assert await sql_store.get_entry("acme", ALICE.key, second) is None
        await host.aclose()  # waits for whatever still runs
    assert application.runs == 1


async def test_64_concurrent_callers_with_one_request_id_make_one_effect_and_no_errors(
    make_sql_store: SqlStoreFactory,
) -> None:
    store = await make_sql_store(pool_size=CALLERS)
    application, host = await app_host(store, in_progress_wait=60)
    for iteration in range(ITERATIONS):
        outcomes = await burst(host, application, str(uuid.uuid4()))
        errors = [o for o in outcomes if not isinstance(o, Completed)]
        assert errors == []
        completed = [o for o in outcomes if isinstance(o, Completed)]
        assert sum(not o.replayed for o in completed) == 1
        assert len({str(o.output) for o in completed}) == 1
        assert application.runs == iteration + 1
        assert await rows(store, "app_notes") == iteration + 1


async def test_an_approved_destructive_call_consumes_its_approval_in_the_same_transaction(
    sql_store: SqlStore,
) -> None:
    application, host = await app_host(sql_store)
    created = await host.invoke("create_note", call("doomed"), ALICE)
    assert isinstance(created, Completed) and isinstance(created.output, dict)
    note_id = created.output["note_id"]
    request_id = str(uuid.uuid4())
    controls: dict[str, object] = {"requestId": request_id, "confirmed": True}
    args = {"note_id": note_id, "_charter": controls}
    asked = await host.invoke("delete_note", args, ALICE)
    assert isinstance(asked, InteractionRequired)
    approval_id = asked.interaction.id
    again = await host.invoke("delete_note", args, ALICE)
    assert isinstance(again, InteractionRequired) and again.interaction.id == approval_id
    listed = await host.approvals.list(BOB)
    assert [a.id for a in listed] == [approval_id]
    granted = await host.approvals.grant(approval_id, BOB)
    assert not isinstance(granted, Failed) and granted.status == "approved"
    approved = {"note_id": note_id, "_charter": {**controls, "approvalId": approval_id}}
    done = await host.invoke("delete_note", approved, ALICE)
    assert isinstance(done, Completed) and done.output == {"deleted": True}
    replay = await host.invoke("delete_note", approved, ALICE)
    assert isinstance(replay, Completed) and replay.replayed
    stored = await sql_store.get_approval(approval_id)
    assert stored is not None and (stored.status, stored.consumed_by) == ("consumed", request_id)
    reused_controls = {**controls, "requestId": str(uuid.uuid4()), "approvalId": approval_id}
    reused = {"note_id": note_id, "_charter": reused_controls}
    denied = await host.invoke("delete_note", reused, ALICE)
    assert isinstance(denied, Failed) and denied.code is ErrorCode.AUTHORIZATION_DENIED
    assert application.runs == 2  # create + one delete


async def test_a_created_target_claim_commits_with_the_handlers_row(sql_store: SqlStore) -> None:
    application, host = await app_host(sql_store)
    request_id = str(uuid.uuid4())
    first = await host.invoke("import_note", call("imported", request_id), ALICE)
    assert isinstance(first, Completed) and isinstance(first.output, dict)
    replay = await host.invoke("import_note", call("imported", request_id), ALICE)
    assert isinstance(replay, Completed) and replay.replayed and replay.output == first.output
    assert application.runs == 1
    async with sql_store.transaction(wait=5) as tx:
        claim = await tx.get_claim("acme", ALICE.key, request_id)
    assert claim is not None and claim.result_reference == f"note:{first.output['note_id']}"
    assert await rows(sql_store, "app_notes") == 1


def on_claims(sent: list[str]) -> list[str]:
    """The first word of each statement ``sent`` on created-target claims."""
    return [statement.split()[0] for statement in sent if "charter_claims" in statement]


async def test_a_created_target_call_does_not_look_for_a_claim_its_new_row_cannot_have(
    sql_store: SqlStore,
) -> None:
    # A claim lives and dies with its ledger row, so a call that has just inserted its row
    # knows there is no claim yet: its claim costs the INSERT and the result's UPDATE, not
    # a SELECT before them.
    application, host = await app_host(sql_store)
    with statements_sent(sql_store) as sent:
        first = await host.invoke("import_note", call("imported"), ALICE)
    assert isinstance(first, Completed) and not first.replayed
    assert on_claims(sent) == ["INSERT", "UPDATE"]
    assert application.runs == 1 and await rows(sql_store, "app_notes") == 1


async def test_a_created_target_call_whose_row_expired_creates_anew_with_a_new_claim(
    sql_store: SqlStore,
) -> None:
    # Past the retention the expired row is replaced and its claim dropped with it: the
    # same request id creates a new target, and the new claim records it.
    now = [datetime.now(UTC)]
    application, host = await app_host(sql_store, clock=lambda: now[0])
    request_id = str(uuid.uuid4())
    first = await host.invoke("import_note", call("imported", request_id), ALICE)
    now[0] += timedelta(hours=25)
    with statements_sent(sql_store) as sent:
        again = await host.invoke("import_note", call("imported", request_id), ALICE)
    assert isinstance(first, Completed) and isinstance(first.output, dict)
    assert isinstance(again, Completed) and isinstance(again.output, dict)
    assert not again.replayed and again.output != first.output
    assert on_claims(sent) == ["DELETE", "INSERT", "UPDATE"]
    assert application.runs == 2 and await rows(sql_store, "app_notes") == 2
    async with sql_store.transaction(wait=5) as tx:
        claim = await tx.get_claim("acme", ALICE.key, request_id)
    assert claim is not None and claim.result_reference == f"note:{again.output['note_id']}"


async def test_a_deferred_call_is_persisted_and_settled_once(sql_store: SqlStore) -> None:
    application, host = await app_host(sql_store)
    request_id = str(uuid.uuid4())
    deferred = await host.invoke("export_notes", call("all", request_id), ALICE)
    assert isinstance(deferred, Deferred) and isinstance(deferred.token, dict)
    invocation_id = deferred.token["invocationId"]
    assert isinstance(invocation_id, str)
    status = await host.action_status(ALICE, request_id)
    assert status is not None and status.status == "deferred"
    outcome = Completed(output={"note_id": "export_1"})
    assert await host.settle(invocation_id, outcome)
    assert not await host.settle(invocation_id, outcome)
    status = await host.action_status(ALICE, request_id)
    assert status is not None and status.status == "completed"
    assert status.outcome == outcome.model_dump(mode="json")
    assert application.runs == 1


async def test_host_aclose_closes_the_store(store_url: str) -> None:
    store = SqlStore(store_url)
    await store.open()
    _, host = await app_host(store)
    await host.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await store.get_entry("acme", "alice", "r")


@pytest.mark.parametrize("tool", ["archive_note", "delete_note"])
async def test_a_nul_in_a_command_target_is_invalid_input_and_leaves_no_row(
    sql_store: SqlStore, tool: str
) -> None:
    # The claim (archive) or the approval (delete) refuses the target before the database
    # sees it; UnstorableValue is a ToolError, so the host answers INVALID_INPUT.
    _, host = await app_host(sql_store)
    controls = {"requestId": str(uuid.uuid4()), "confirmed": True}
    outcome = await host.invoke(tool, {"note_id": "n\x001", "_charter": controls}, ALICE)
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.INVALID_INPUT
    assert outcome.reason == "unstorable_value"
    assert await rows(sql_store, "charter_ledger_entries") == 0
    assert await rows(sql_store, "charter_approvals") == 0
    [event] = await sql_store.events()
    assert event.code == "INVALID_INPUT"
