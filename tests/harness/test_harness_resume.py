"""Pausing and resuming: approvals, confirmations, responses, deferrals, exactly-once."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from harness_support import ALICE, BOB, AskIn, AskOut, World, calls, last_results
from tests.builders import tiered_tool

from charter import Completed, Failed, Interaction, InteractionRequired, ToolContext
from charter.errors import ErrorCode
from charter.harness import (
    Approve,
    HarnessEvent,
    MemorySessionStore,
    ModelResponse,
    PendingInteraction,
    Respond,
    ResumeCodes,
    SealCodes,
    Session,
    SessionRecord,
    SessionStore,
    Settle,
    SqliteSessionStore,
    TurnResult,
)
from charter.harness.testing import ScriptedModel

pytestmark = pytest.mark.anyio

CANCEL_B1 = calls(("cancel_booking", "c1", {"booking_id": "b1"}))


async def confirm(session: Session, paused: TurnResult) -> PendingInteraction:
    """Confirm the pending confirmation; return the approval the host asks for next."""
    assert paused.status == "paused", paused
    (confirmation,) = paused.interactions
    assert confirmation.gate == "confirmation"
    waiting = await session.resume(Approve(interaction_id=confirmation.interaction.id))
    assert waiting.status == "paused", waiting
    (approval,) = waiting.interactions
    assert approval.gate == "approval"
    return approval


async def resume_denied_without_running(
    world: World, session: Session, approval: PendingInteraction
) -> None:
    """Resume ``session`` approving ``approval``: its one result is a denial, nothing ran."""
    done = await session.resume(Approve(interaction_id=approval.interaction.id))
    (res,) = done.results
    assert res.kind == "denied"
    assert world.executions == []


async def test_an_approval_is_decided_before_the_handler_runs_and_resumes_one_invocation(
    world: World,
) -> None:
    # Port of "preflight → preflight-resumed → execute with a single invocationId".
    # Catches a handler that runs (or re-runs from the top) to discover it needs approval.
    events: list[HarnessEvent] = []
    model = ScriptedModel([CANCEL_B1, ModelResponse(text="cancelled")])
    session = world.harness(model, observer=events.append).session(ALICE)
    approval = await confirm(session, await session.run("cancel b1"))
    assert world.executions == []
    assert approval.interaction.metadata is not None
    assert approval.interaction.metadata["code"] == "APPROVAL_REQUIRED"

    assert await world.host.approvals.grant(approval.interaction.id, BOB)
    done = await session.resume(Approve(interaction_id=approval.interaction.id))

    assert done.status == "completed" and done.text == "cancelled"
    assert [(r.kind, r.output) for r in done.results] == [("completed", {"cancelled": "b1"})]
    ((tool, invocation_id, _),) = world.executions
    assert (tool, invocation_id) == ("cancel_booking", approval.invocation_id)
    order = [e.type for e in events if e.type in ("interaction.required", "interaction.resumed")]
    assert order == ["interaction.required", "interaction.resumed"] * 2
    assert [e.invocation_id for e in events if e.call_id == "c1"] == [approval.invocation_id] * len(
        [e for e in events if e.call_id == "c1"]
    )


async def test_a_rejected_approval_is_denied_without_running_the_tool(world: World) -> None:
    # Catches a resume that re-runs the tool and leaves it to check "approved" itself.
    model = ScriptedModel([CANCEL_B1, ModelResponse(text="ok")])
    session = world.harness(model).session(ALICE)
    approval = await confirm(session, await session.run("cancel b1"))

    done = await session.resume(Approve(interaction_id=approval.interaction.id, approved=False))

    assert done.status == "completed"
    (res,) = last_results(model.requests[-1].messages)
    assert (res.kind, res.reason) == ("denied", "Approval rejected")
    assert world.executions == []


async def test_a_rejected_confirmation_is_denied_without_asking_an_approver(world: World) -> None:
    model = ScriptedModel([CANCEL_B1])
    session = world.harness(model).session(ALICE)
    paused = await session.run("cancel b1")
    done = await session.resume(
        Approve(interaction_id=paused.interactions[0].interaction.id, approved=False)
    )

    assert [(r.kind, r.reason) for r in done.results] == [("denied", "Approval rejected")]
    assert await world.host.approvals.list(BOB) == []


async def test_a_response_resume_passes_the_saved_token_and_the_value(world: World) -> None:
    # Catches a pause that keeps the interaction but drops the tool's token, or a resume
    # that mints a new invocation id instead of re-running the same invocation.
    model = ScriptedModel([calls(("ask_user", "c1", {"question": "Which date?"}))])
    session = world.harness(model).session(ALICE)
    paused = await session.run("book")
    (asked,) = paused.interactions
    assert (asked.interaction.id, asked.interaction.kind) == ("ask-1", "response")

    done = await session.resume(Respond(interaction_id="ask-1", value="May 3"))

    assert done.results[0].output == {"answer": "May 3 (token {'asked': 'Which date?'})"}
    ids = {invocation for name, invocation, _ in world.executions if name == "ask_user"}
    assert ids == {asked.invocation_id}


async def test_a_handlers_question_after_the_users_confirmation_gets_the_answer(
    world: World,
) -> None:
    # Answering runs the call again past the confirmation the user gave; it used to stop
    # at the confirmation again, so the handler never got the answer.
    async def refund(args: AskIn, ctx: ToolContext) -> AskOut | InteractionRequired:
        world.executions.append(("refund", ctx.invocation_id, args.model_dump()))
        if ctx.resume is None:
            card = Interaction(id="card-1", kind="response", prompt=args.question)
            return InteractionRequired(interaction=card)
        return AskOut(answer=f"refunded to {ctx.resume.value}")

    world.registry.register(tiered_tool("refund", "sensitive", refund, AskIn, AskOut))
    model = ScriptedModel(
        [calls(("refund", "c1", {"question": "Which card?"})), ModelResponse(text="done")]
    )
    session = world.harness(model).session(ALICE)
    paused = await session.run("refund my trip")
    (confirmation,) = paused.interactions
    assert confirmation.gate == "confirmation"
    asked = await session.resume(Approve(interaction_id=confirmation.interaction.id))
    assert asked.status == "paused", asked
    (question,) = asked.interactions
    assert question.interaction.id == "card-1"
    done = await session.resume(Respond(interaction_id="card-1", value="visa"))
    assert done.status == "completed", done
    assert [r.output for r in done.results] == [{"answer": "refunded to visa"}]
    assert [name for name, _, _ in world.executions] == ["refund", "refund"]


async def test_a_stale_interaction_id_is_rejected_without_a_model_call(world: World) -> None:
    # Catches a resume that continues the loop (calling the model) whatever it was given.
    model = ScriptedModel([calls(("ask_user", "c1", {"question": "?"}))])
    session = world.harness(model).session(ALICE)
    await session.run("go")
    steps = len(model.requests)

    result = await session.resume(Respond(interaction_id="ask-0", value="x"))

    assert (result.status, result.code) == ("rejected", ResumeCodes.INVALID_INPUT)
    assert len(model.requests) == steps
    assert (await session.record()).status == "paused"  # type: ignore[union-attr]


async def test_a_decision_of_the_wrong_kind_is_rejected(world: World) -> None:
    # Catches a resume matching on the interaction id alone: an "approval" would re-run a
    # tool that asked the user a question, with no answer.
    model = ScriptedModel([calls(("ask_user", "c1", {"question": "?"}))])
    session = world.harness(model).session(ALICE)
    await session.run("go")

    result = await session.resume(Approve(interaction_id="ask-1"))

    assert (result.status, result.code) == ("rejected", ResumeCodes.INVALID_INPUT)
    assert world.count("ask_user") == 1


async def test_resuming_the_same_approval_twice_executes_once(world: World) -> None:
    # Catches a harness that re-executes whatever the saved pause says (pydantic-ai with a
    # replayed history, the OpenAI SDK's RunState resumed twice): the second resume must
    # find no open interaction.
    model = ScriptedModel([CANCEL_B1, ModelResponse(text="ok")])
    session = world.harness(model).session(ALICE)
    approval = await confirm(session, await session.run("cancel b1"))
    await world.host.approvals.grant(approval.interaction.id, BOB)
    decision = Approve(interaction_id=approval.interaction.id)

    first = await session.resume(decision)
    second = await session.resume(decision)

    assert first.status == "completed"
    assert (second.status, second.code) == ("rejected", ResumeCodes.INVALID_INPUT)
    assert world.count("cancel_booking") == 1


async def test_two_concurrent_resumes_of_one_pause_execute_once(world: World) -> None:
    # Catches load → execute → save without a compare-and-set claim (LangGraph's two
    # concurrent Command(resume=...)): both resumers would run the tool. Two harnesses
    # (two processes) share the session store and the ledger.
    world.gate("b1")  # the handler waits inside until the test opens the gate
    store = MemorySessionStore()
    first = world.harness(ScriptedModel([CANCEL_B1]), store=store).session(ALICE, "s1")
    approval = await confirm(first, await first.run("cancel b1"))
    await world.host.approvals.grant(approval.interaction.id, BOB)
    decision = Approve(interaction_id=approval.interaction.id)
    other = world.harness(ScriptedModel([]), host=world.new_host(), store=store).session(
        ALICE, "s1"
    )

    results: list[TurnResult] = []

    async def resume(session: Session) -> None:
        results.append(await session.resume(decision))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(resume, first)
            await world.entered_event("b1").wait()
            tg.start_soon(resume, other)
            await anyio.sleep(0.01)
            world.gate("b1").set()

    assert sorted(r.status for r in results) == ["completed", "rejected"]
    assert next(r.code for r in results if r.status == "rejected") == ResumeCodes.CONFLICT
    assert world.count("cancel_booking") == 1


@pytest.mark.parametrize("durable", ["memory", "sqlite"])
async def test_a_resume_after_a_restart_executes_once(
    world: World, tmp_path: Path, durable: str
) -> None:
    # The pause survives the process: a new host and harness on the same stores resume it.
    def store() -> SessionStore:
        return shared if durable == "memory" else SqliteSessionStore(tmp_path / "s.db")

    shared = MemorySessionStore()
    before = world.harness(ScriptedModel([CANCEL_B1]), store=store()).session(ALICE, "s1")
    approval = await confirm(before, await before.run("cancel b1"))
    await world.host.approvals.grant(approval.interaction.id, BOB)

    after_restart = world.harness(
        ScriptedModel([ModelResponse(text="done")]), host=world.new_host(), store=store()
    ).session(ALICE, "s1")
    decision = Approve(interaction_id=approval.interaction.id)
    done = await after_restart.resume(decision)
    again = await after_restart.resume(decision)

    assert done.status == "completed" and done.text == "done"
    assert again.status == "rejected"
    assert world.count("cancel_booking") == 1


class CrashAfterRun(MemorySessionStore):
    """A session store whose process dies right after the tool ran (the save is lost)."""

    def __init__(self) -> None:
        super().__init__()
        self.crash = False

    async def save(self, record: SessionRecord, *, expected_revision: int | None) -> bool:
        if self.crash and record.pending is None:
            raise RuntimeError("process died")
        return await super().save(record, expected_revision=expected_revision)


async def test_a_resume_that_died_after_running_replays_from_the_ledger(world: World) -> None:
    # Catches a harness whose request id is fresh per attempt (or absent): the retried
    # resume would run the approved cancellation a second time.
    store = CrashAfterRun()
    session = world.harness(ScriptedModel([CANCEL_B1]), store=store).session(ALICE, "s1")
    approval = await confirm(session, await session.run("cancel b1"))
    await world.host.approvals.grant(approval.interaction.id, BOB)
    decision = Approve(interaction_id=approval.interaction.id)
    store.crash = True
    with pytest.raises(RuntimeError, match="process died"):
        await session.resume(decision)
    store.crash = False

    retry = world.harness(ScriptedModel([]), host=world.new_host(), store=store).session(
        ALICE, "s1"
    )
    held = await retry.resume(decision)
    assert (held.status, held.code) == ("rejected", ResumeCodes.CONFLICT)  # lease not over
    world.clock.advance(timedelta(minutes=6))
    done = await retry.resume(decision)

    assert done.status == "completed"
    (res,) = done.results
    assert (res.kind, res.replayed) == ("completed", True)
    assert world.count("cancel_booking") == 1


async def test_an_approval_is_bound_to_the_arguments_it_was_granted_for(world: World) -> None:
    # Catches an approval that is a plain boolean (pydantic-ai#5536): someone with write
    # access to the paused state swaps the booking after the approver said yes.
    store = MemorySessionStore()
    session = world.harness(ScriptedModel([CANCEL_B1]), store=store).session(ALICE, "s1")
    approval = await confirm(session, await session.run("cancel b1"))
    await world.host.approvals.grant(approval.interaction.id, BOB)
    record = await store.load("s1")
    assert record is not None and record.pending is not None
    (call,) = record.pending.calls
    tampered = record.pending.model_copy(
        update={"calls": (call.model_copy(update={"args": {"booking_id": "b2"}}),)}
    )
    assert await store.save(
        record.model_copy(update={"pending": tampered, "revision": record.revision + 1}),
        expected_revision=record.revision,
    )

    await resume_denied_without_running(world, session, approval)


async def test_an_expired_approval_is_denied_without_running(world: World) -> None:
    # Catches a resume that trusts the stored "approved" flag instead of asking the host,
    # which checks the approval's expiry on its own clock.
    session = world.harness(ScriptedModel([CANCEL_B1])).session(ALICE)
    approval = await confirm(session, await session.run("cancel b1"))
    await world.host.approvals.grant(approval.interaction.id, BOB)
    world.clock.advance(timedelta(hours=2))  # the host's approval_ttl is 1 h

    await resume_denied_without_running(world, session, approval)


async def test_resuming_before_the_approver_decides_keeps_the_session_paused(world: World) -> None:
    # Catches a resume that turns the host's "not approved yet" into a final denial.
    session = world.harness(ScriptedModel([CANCEL_B1])).session(ALICE)
    approval = await confirm(session, await session.run("cancel b1"))

    early = await session.resume(Approve(interaction_id=approval.interaction.id))

    assert early.status == "paused"
    assert [i.interaction.id for i in early.interactions] == [approval.interaction.id]
    await world.host.approvals.grant(approval.interaction.id, BOB)
    done = await session.resume(Approve(interaction_id=approval.interaction.id))
    assert done.status == "completed" and world.count("cancel_booking") == 1


async def test_a_resume_after_a_long_delay_still_works(world: World) -> None:
    # Catches a harness-side deadline on pauses (the seed has none).
    # The harness has no deadline of its own (the host's approvals do).
    session = world.harness(ScriptedModel([calls(("ask_user", "c1", {"question": "?"}))])).session(
        ALICE
    )
    await session.run("go")
    world.clock.advance(timedelta(days=30))

    done = await session.resume(Respond(interaction_id="ask-1", value="yes"))
    assert done.status == "completed"


async def test_a_deferred_call_pauses_until_it_is_settled_with_validated_output(
    world: World,
) -> None:
    # Catches a settle that hands the external result to the model unvalidated, or that
    # can be applied twice.
    model = ScriptedModel([calls(("start_job", "c1", {"job": "export"}))])
    session = world.harness(model).session(ALICE)
    paused = await session.run("export")
    (job,) = paused.deferred
    assert job.token == {"job": "export"}

    bad = await session.resume(
        Settle(invocation_id=job.invocation_id, outcome=Completed(output={"status": 1}))
    )
    assert bad.results[0].code == SealCodes.INVALID_OUTPUT
    again = await session.resume(
        Settle(invocation_id=job.invocation_id, outcome=Completed(output={"status": "done"}))
    )
    assert again.status == "rejected"
    assert world.count("start_job") == 1
    # The ledger's deferred record was settled too, exactly once.
    assert not await world.host.settle(job.invocation_id, Completed(output={"status": "x"}))


async def test_stopping_a_paused_session_settles_every_open_call_as_cancelled(
    world: World,
) -> None:
    # Port of "cancelling a wait pairs every call with tool.cancelled".
    model = ScriptedModel(
        [
            calls(
                ("ask_user", "c1", {"question": "?"}),
                ("start_job", "c2", {"job": "x"}),
                ("add", "c3", {"a": 1, "b": 1}),
            )
        ]
    )
    session = world.harness(model).session(ALICE)
    paused = await session.run("go")
    assert paused.status == "paused"

    stopped = await session.stop()

    assert stopped.status == "cancelled"
    assert [(r.call_id, r.code) for r in stopped.results] == [
        ("c1", SealCodes.CANCELLED),
        ("c2", SealCodes.CANCELLED),
        ("c3", None),
    ]
    assert len(model.requests) == 1
    late = await session.resume(Respond(interaction_id="ask-1", value="x"))
    assert late.status == "rejected"
    assert not await world.host.settle(
        paused.deferred[0].invocation_id, Failed(code=ErrorCode.CANCELLED, message="x")
    )


async def test_a_new_turn_is_refused_while_the_session_is_paused(world: World) -> None:
    model = ScriptedModel([calls(("ask_user", "c1", {"question": "?"}))])
    session = world.harness(model).session(ALICE)
    await session.run("go")

    result = await session.run("something else")
    assert (result.status, result.code) == ("rejected", ResumeCodes.PAUSED)
    assert len(model.requests) == 1


async def test_a_session_left_running_by_a_dead_process_can_be_stopped_after_its_lease(
    world: World,
) -> None:
    store = CrashAfterRun()
    session = world.harness(ScriptedModel([CANCEL_B1]), store=store).session(ALICE, "s1")
    approval = await confirm(session, await session.run("cancel b1"))
    await world.host.approvals.grant(approval.interaction.id, BOB)
    store.crash = True
    with pytest.raises(RuntimeError, match="process died"):
        await session.resume(Approve(interaction_id=approval.interaction.id))
    store.crash = False
    other = world.harness(ScriptedModel([]), store=store).session(ALICE, "s1")

    held = await other.stop()
    assert (held.status, held.code) == ("rejected", ResumeCodes.CONFLICT)
    world.clock.advance(timedelta(minutes=6))
    stopped = await other.stop()

    # The dead resume had committed the cancellation: stopping reports it, not "cancelled".
    assert stopped.status == "cancelled"
    assert [(r.kind, r.replayed) for r in stopped.results] == [("completed", True)]
    assert world.count("cancel_booking") == 1
    record = await other.record()
    assert record is not None and (record.status, record.pending) == ("idle", None)


async def test_invalid_arguments_are_refused_before_anyone_is_asked_to_confirm_or_approve(
    world: World,
) -> None:
    # Catches approval before validation (the OpenAI Agents SDK asks a person to approve
    # a call whose arguments are invalid, and fails it only afterwards).
    model = ScriptedModel([calls(("cancel_booking", "c1", {"booking_id": 42}))])
    result = await world.harness(model).session(ALICE).run("cancel 42")

    assert result.status == "completed"
    assert result.results[0].code == SealCodes.INVALID_ARGUMENTS
    assert await world.host.approvals.list(BOB) == []


async def test_a_tool_asking_for_approval_itself_resumes_with_ctx_resume_and_its_token(
    world: World,
) -> None:
    # The tool's own (not the host's) approval: the harness generates the interaction id
    # and re-runs the same invocation with ctx.resume; catches a harness that treats every
    # approval as a host approval (sending an approvalId the host never issued).
    from harness_support import AddOut, Empty

    seen: list[tuple[str | None, object]] = []

    async def guarded(args: Empty, ctx: ToolContext) -> AddOut | InteractionRequired:
        seen.append((ctx.invocation_id, ctx.resume))
        if ctx.resume is None:
            return InteractionRequired(
                interaction=Interaction(id="", kind="approval", prompt="Really?"),
                token={"step": 1},
            )
        return AddOut(sum=1 if ctx.resume.approved else 0)

    world.registry.register(
        tiered_tool(
            "guarded", "read", guarded, Empty, AddOut, description="Asks for approval itself."
        )
    )
    session = world.harness(ScriptedModel([calls(("guarded", "c1", {}))])).session(ALICE)
    paused = await session.run("go")
    (pending,) = paused.interactions
    assert pending.gate is None
    assert pending.interaction.id == f"int_{pending.invocation_id}"

    done = await session.resume(Approve(interaction_id=pending.interaction.id))

    assert done.results[0].output == {"sum": 1}
    (first_id, first_resume), (second_id, second_resume) = seen
    assert first_id == second_id == pending.invocation_id and first_resume is None
    assert getattr(second_resume, "token", None) == {"step": 1}
