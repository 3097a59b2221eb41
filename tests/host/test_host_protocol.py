"""The host owns the continuation protocol: prepare, execute, resume, settle, request ids."""

from __future__ import annotations

import copy
import dataclasses
import gc
import inspect
import uuid
import weakref
from typing import Any

import pytest
from pydantic import BaseModel
from tests.builders import destructive_risk, risk, tiered_tool
from tests.builders import request_id as rid

from charter import ActionPolicy, Host, Principal, Registry, ToolContext
from charter.context import ResumeInfo
from charter.errors import ErrorCode
from charter.host import CallOptions, PreparedCall, derive_request_id
from charter.outcome import Completed, Deferred, Denied, Failed, Interaction, InteractionRequired

pytestmark = pytest.mark.anyio

WRITE = risk("data-write")
DESTRUCTIVE = destructive_risk("data-delete")
ALICE = Principal(subject="alice", tenant_id="acme", scopes=frozenset({"notes:write"}))
APPROVER = Principal(subject="ada", tenant_id="acme", scopes=frozenset({"charter:approve"}))


class Note(BaseModel):
    title: str


class Saved(BaseModel):
    ok: bool
    run: int


class Kit:
    """A host with one tool per policy shape; ``runs`` counts handler runs per tool."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        registry = Registry()

        def add(name: str, tier: str, **options: Any) -> None:
            async def handler(note: Note, ctx: ToolContext) -> Saved | Deferred:
                self.runs[name] = self.runs.get(name, 0) + 1
                if name == "export_note":
                    return Deferred()
                return Saved(ok=True, run=self.runs[name])

            options.setdefault("risk_policy", WRITE)
            registry.register(
                tiered_tool(
                    name, tier, handler, Note, Saved, required_scopes=["notes:write"], **options
                )
            )

        add("save_note", "write")
        add("publish_note", "sensitive")
        add("delete_note", "destructive", risk_policy=DESTRUCTIVE)
        add("tag_note", "write", action_policy=ActionPolicy(target_type="note", ledger="optional"))
        add("export_note", "write")
        self.host = Host(registry)

    async def prepared(self, tool: str) -> PreparedCall:
        """``tool`` prepared for ALICE with a fresh request id; it must be admitted."""
        arguments = {"title": "t", "_charter": {"requestId": rid()}}
        prepared = await self.host.prepare(tool, arguments, ALICE)
        assert isinstance(prepared, PreparedCall)
        return prepared

    async def call(self, tool: str, request_id: str | None = None, **controls: Any) -> Any:
        charter: dict[str, Any] = dict(controls)
        if request_id is not None:
            charter["requestId"] = request_id
        return await self.host.invoke(tool, {"title": "t", "_charter": charter}, ALICE)


# -- prepare / execute ---------------------------------------------------------------------


async def test_prepare_runs_every_check_but_never_the_handler() -> None:
    kit = Kit()
    prepared = await kit.prepared("save_note")
    assert prepared.name == "save_note" and prepared.fingerprint is not None
    assert kit.runs == {}
    bad = await kit.host.prepare("save_note", {"title": 1, "_charter": {"requestId": rid()}}, ALICE)
    assert isinstance(bad, Failed) and bad.code is ErrorCode.INVALID_INPUT


async def test_a_prepared_call_executes_once_and_only_on_its_own_host() -> None:
    kit, other = Kit(), Kit()
    prepared = await kit.prepared("save_note")
    foreign = await other.host.execute(prepared)
    assert isinstance(foreign, Failed) and foreign.reason == "prepared_call_not_admitted"
    assert isinstance(await kit.host.execute(prepared), Completed)
    twice = await kit.host.execute(prepared)
    assert isinstance(twice, Failed) and twice.reason == "prepared_call_not_admitted"
    assert kit.runs == {"save_note": 1}


async def test_a_discarded_prepared_call_never_runs() -> None:
    kit = Kit()
    prepared = await kit.prepared("save_note")
    kit.host.discard(prepared)
    refused = await kit.host.execute(prepared)
    assert isinstance(refused, Failed) and kit.runs == {}


async def test_a_copied_prepared_call_is_refused_and_the_original_still_runs() -> None:
    kit = Kit()
    prepared = await kit.prepared("save_note")
    for forged in (copy.copy(prepared), dataclasses.replace(prepared)):
        refused = await kit.host.execute(forged)
        assert isinstance(refused, Failed) and refused.reason == "prepared_call_not_admitted"
    assert isinstance(await kit.host.execute(prepared), Completed)
    assert kit.runs == {"save_note": 1}


async def test_the_host_does_not_keep_a_prepared_call_alive() -> None:
    # Prepared calls nobody executes or discards (a transport that gave up) must not pile
    # up: the host holds each one weakly until it runs.
    kit = Kit()
    prepared = await kit.prepared("save_note")
    held = weakref.ref(prepared)
    del prepared
    gc.collect()
    assert held() is None


def test_call_options_take_every_field_and_stay_frozen() -> None:
    names = [f.name for f in dataclasses.fields(CallOptions)]
    assert list(inspect.signature(CallOptions).parameters) == names
    options = CallOptions(call_id="c1", model_name="m")
    assert options == CallOptions(model_name="m", call_id="c1") != CallOptions()
    assert hash(options) == hash(CallOptions(call_id="c1", model_name="m"))
    assert dataclasses.replace(options, call_id="c2").call_id == "c2"
    assert options.cancel is None and options.call_id == "c1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.call_id = "c3"  # type: ignore[misc]
    with pytest.raises(TypeError):
        CallOptions(unknown=1)  # type: ignore[call-arg]


async def test_prepare_answers_the_confirmation_gate_without_running() -> None:
    kit = Kit()
    request = rid()
    paused = await kit.host.prepare(
        "publish_note", {"title": "t", "_charter": {"requestId": request}}, ALICE
    )
    assert isinstance(paused, InteractionRequired) and paused.gate == "confirmation"
    assert paused.request_id == request and kit.runs == {}


# -- resume --------------------------------------------------------------------------------


async def test_resume_continues_a_confirmation_once_and_a_declined_one_is_denied() -> None:
    kit = Kit()
    request = rid()
    arguments = {"title": "t", "_charter": {"requestId": request}}
    paused = await kit.host.invoke("publish_note", arguments, ALICE)
    assert isinstance(paused, InteractionRequired) and paused.gate == "confirmation"

    declined = await kit.host.resume(paused, "publish_note", arguments, ALICE, approved=False)
    assert isinstance(declined, Denied) and declined.cause == "user_declined"
    assert kit.runs == {}

    done = await kit.host.resume(paused, "publish_note", arguments, ALICE)
    again = await kit.host.resume(paused, "publish_note", arguments, ALICE)
    assert isinstance(done, Completed) and done.replayed is False
    assert isinstance(again, Completed) and again.replayed is True
    assert kit.runs == {"publish_note": 1}


async def test_resume_overrides_an_explicit_unconfirmed_control() -> None:
    kit = Kit()
    request = rid()
    arguments = {"title": "t", "_charter": {"requestId": request, "confirmed": False}}
    paused = await kit.host.invoke("publish_note", arguments, ALICE)
    assert isinstance(paused, InteractionRequired)
    assert isinstance(await kit.host.resume(paused, "publish_note", arguments, ALICE), Completed)


async def test_resume_of_an_approval_waits_for_the_approver_then_runs_once() -> None:
    kit = Kit()
    request = rid()
    arguments = {"title": "t", "_charter": {"requestId": request, "confirmed": True}}
    paused = await kit.host.invoke("delete_note", arguments, ALICE)
    assert isinstance(paused, InteractionRequired) and paused.gate == "approval"
    assert paused.approval_status == "pending" and paused.continuation is not None
    assert paused.continuation.approval_id == paused.approval_id

    waiting = await kit.host.resume(paused, "delete_note", arguments, ALICE)
    assert isinstance(waiting, InteractionRequired) and waiting.approval_status == "pending"
    assert kit.runs == {}

    assert paused.approval_id is not None
    await kit.host.approvals.grant(paused.approval_id, APPROVER)
    done = await kit.host.resume(waiting, "delete_note", arguments, ALICE)
    assert isinstance(done, Completed)
    assert kit.runs == {"delete_note": 1}


# -- ledger="optional" ---------------------------------------------------------------------


async def test_an_optional_ledger_with_a_request_id_replays_instead_of_running_again() -> None:
    # Leak 5: three calls with one id ran the handler three times and left no row.
    kit = Kit()
    request = rid()
    outcomes = [await kit.call("tag_note", request) for _ in range(3)]
    assert [o.replayed for o in outcomes] == [False, True, True]
    assert kit.runs == {"tag_note": 1}
    conflict = await kit.host.invoke(
        "tag_note", {"title": "other", "_charter": {"requestId": request}}, ALICE
    )
    assert isinstance(conflict, Failed) and conflict.code is ErrorCode.IDEMPOTENCY_CONFLICT


async def test_an_optional_ledger_without_a_request_id_runs_each_call() -> None:
    kit = Kit()
    for _ in range(2):
        assert isinstance(await kit.call("tag_note"), Completed)
    assert kit.runs == {"tag_note": 2}


# -- settle --------------------------------------------------------------------------------


async def test_settle_refuses_output_that_breaks_the_schema_and_stores_nothing() -> None:
    # Leak 3: the host stored {"ok": "nope", "secret": ...} and served it on replay.
    kit = Kit()
    request = rid()
    deferred = await kit.call("export_note", request)
    assert isinstance(deferred, Deferred) and isinstance(deferred.token, dict)
    invocation_id = str(deferred.token["invocationId"])

    bad = await kit.host.settle(invocation_id, Completed(output={"ok": "nope", "secret": "x"}))
    assert not bad and bad.refused is not None
    assert bad.refused.code is ErrorCode.INVALID_OUTPUT
    status = await kit.host.action_status(ALICE, request)
    assert status is not None and status.status == "deferred"

    good = await kit.host.settle(invocation_id, Completed(output={"ok": True, "run": 1}))
    assert good and isinstance(good.stored, Completed)
    replay = await kit.call("export_note", request)
    assert isinstance(replay, Completed) and replay.output == {"ok": True, "run": 1}
    twice = await kit.host.settle(invocation_id, Completed(output={"ok": True, "run": 2}))
    assert not twice and twice.refused is not None and twice.refused.reason == "already_settled"


async def test_settle_of_an_unknown_call_says_so() -> None:
    kit = Kit()
    unknown = await kit.host.settle("inv_nope", Completed(output={"ok": True, "run": 1}))
    assert not unknown and unknown.refused is not None
    assert unknown.refused.code is ErrorCode.NOT_FOUND


# -- request ids -----------------------------------------------------------------------------


def test_derived_request_ids_are_stable_uuids_per_scope_and_call() -> None:
    first = derive_request_id("session-1", "call-1")
    assert first == derive_request_id("session-1", "call-1")
    assert str(uuid.UUID(first)) == first
    assert first != derive_request_id("session-1", "call-2")
    assert first != derive_request_id("session-2", "call-1")


@pytest.mark.parametrize(("scope", "call_id"), [("s", "c"), ("sess-é", "toolu_01\x1f☃"), ("", "")])
def test_derived_request_ids_are_uuid5_of_the_harness_namespace(scope: str, call_id: str) -> None:
    # Ledgers hold ids derived since the first release: the value must never change.
    namespace = uuid.UUID("6b0d4a52-8f55-4f0a-9a63-3c2f3f0c1a77")
    expected = uuid.uuid5(namespace, f"{scope}\x1f{call_id}")
    assert derive_request_id(scope, call_id) == str(expected)


async def test_request_approval_never_runs_the_tool_whatever_its_policy() -> None:
    kit = Kit()
    for tool in ("save_note", "publish_note", "tag_note"):
        asked = await kit.host.request_approval(tool, {"title": "t"}, ALICE, request_id=rid())
        assert isinstance(asked, Failed) and asked.reason == "approval_not_required"
    record = await kit.host.request_approval("delete_note", {"title": "t"}, ALICE, request_id=rid())
    assert not isinstance(record, Failed) and getattr(record, "status", None) == "pending"
    assert kit.runs == {}


async def test_request_approval_names_the_control_it_refuses() -> None:
    kit = Kit()
    bidi = await kit.host.request_approval(
        "delete_note", {"title": "t"}, ALICE, request_id=rid(), reason_code="\u202edevorppa"
    )
    assert isinstance(bidi, Failed) and bidi.reason == "invalid_controls"
    assert "reason_code" in bidi.message and "requestId must be a UUID" not in bidi.message
    not_uuid = await kit.host.request_approval(
        "delete_note", {"title": "t"}, ALICE, request_id="one", reason_code=None
    )
    assert isinstance(not_uuid, Failed) and "request_id" in not_uuid.message
    assert kit.runs == {}


async def test_a_pause_cannot_continue_another_request() -> None:
    kit = Kit()
    first = rid()
    arguments = {"title": "t", "_charter": {"requestId": first, "confirmed": True}}
    paused = await kit.host.invoke("delete_note", arguments, ALICE)
    assert isinstance(paused, InteractionRequired) and paused.approval_id is not None
    await kit.host.approvals.grant(paused.approval_id, APPROVER)
    other = {"title": "t", "_charter": {"requestId": rid()}}
    refused = await kit.host.resume(paused, "delete_note", other, ALICE)
    assert isinstance(refused, Failed) and refused.reason == "request_id_mismatch"
    assert kit.runs == {}
    done = await kit.host.resume(paused, "delete_note", arguments, ALICE)
    assert isinstance(done, Completed) and kit.runs == {"delete_note": 1}


# -- a handler's own question behind the host's gates --------------------------------------


class Asking:
    """Tools whose handler asks which card to refund to before it runs; ``answers`` it got."""

    def __init__(self) -> None:
        self.answers: list[ResumeInfo | None] = []
        registry = Registry()

        async def handler(note: Note, ctx: ToolContext) -> Saved | InteractionRequired:
            self.answers.append(ctx.resume)
            if ctx.resume is None:
                card = Interaction(id="card", kind="response", prompt="Which card?")
                return InteractionRequired(interaction=card, token={"step": 1})
            return Saved(ok=ctx.resume.approved is not False, run=len(self.answers))

        for name, tier, policy in (
            ("refund_note", "sensitive", WRITE),
            ("purge_note", "destructive", DESTRUCTIVE),
        ):
            registry.register(
                tiered_tool(
                    name,
                    tier,
                    handler,
                    Note,
                    Saved,
                    required_scopes=["notes:write"],
                    risk_policy=policy,
                )
            )
        self.host = Host(registry)


async def test_a_handlers_question_after_the_confirmation_gets_its_answer() -> None:
    # Answering the question runs the call again: it must pass the confirmation it passed
    # before, not stop at it again with the handler never getting the answer.
    kit = Asking()
    arguments = {"title": "t", "_charter": {"requestId": rid()}}
    confirm = await kit.host.invoke("refund_note", arguments, ALICE)
    assert isinstance(confirm, InteractionRequired) and confirm.gate == "confirmation"
    asked = await kit.host.resume(confirm, "refund_note", arguments, ALICE)
    assert isinstance(asked, InteractionRequired) and asked.gate == "handler"
    assert asked.continuation is not None and asked.continuation.confirmed is True
    done = await kit.host.resume(asked, "refund_note", arguments, ALICE, value={"card": "visa"})
    assert isinstance(done, Completed) and done.output == {"ok": True, "run": 2}
    assert kit.answers == [
        None,
        ResumeInfo(interaction_id="card", kind="response", approved=True, value={"card": "visa"},
                   token={"step": 1}),
    ]  # fmt: skip
    replay = await kit.host.resume(asked, "refund_note", arguments, ALICE, value={"card": "x"})
    assert isinstance(replay, Completed) and replay.replayed and len(kit.answers) == 2


async def test_a_declined_question_after_the_confirmation_is_the_handlers_to_decide() -> None:
    kit = Asking()
    arguments = {"title": "t", "_charter": {"requestId": rid(), "confirmed": True}}
    asked = await kit.host.invoke("refund_note", arguments, ALICE)
    assert isinstance(asked, InteractionRequired) and asked.gate == "handler"
    declined = await kit.host.resume(asked, "refund_note", arguments, ALICE, approved=False)
    assert isinstance(declined, Completed) and declined.output == {"ok": False, "run": 2}


async def test_a_handlers_question_after_an_approval_uses_the_approval_once() -> None:
    kit = Asking()
    arguments = {"title": "t", "_charter": {"requestId": rid(), "confirmed": True}}
    waiting = await kit.host.invoke("purge_note", arguments, ALICE)
    assert isinstance(waiting, InteractionRequired) and waiting.approval_id is not None
    await kit.host.approvals.grant(waiting.approval_id, APPROVER)
    asked = await kit.host.resume(waiting, "purge_note", arguments, ALICE)
    assert isinstance(asked, InteractionRequired) and asked.gate == "handler"
    assert asked.continuation is not None
    assert asked.continuation.approval_id == waiting.approval_id
    # The pause rolled the call back: the approval is still unused ...
    approval = await kit.host.approvals.get(APPROVER, waiting.approval_id)
    assert approval is not None and approval.status == "approved"
    done = await kit.host.resume(asked, "purge_note", arguments, ALICE, value={"card": "visa"})
    assert isinstance(done, Completed) and done.output == {"ok": True, "run": 2}
    # ... and the run that completed used it.
    used = await kit.host.approvals.get(APPROVER, waiting.approval_id)
    assert used is not None and used.status == "consumed"
    other = {"title": "t", "_charter": {"requestId": rid()}}
    refused = await kit.host.resume(asked, "purge_note", other, ALICE, value={"card": "visa"})
    assert isinstance(refused, Failed) and refused.reason == "request_id_mismatch"
    assert len(kit.answers) == 2


async def test_a_handlers_pause_carries_no_approval_another_tenants_principal_can_use() -> None:
    # The continuation names ALICE's approval: alice of another tenant, resuming the same
    # pause with the same request id, is a stranger to it and reaches no handler.
    kit = Asking()
    arguments = {"title": "t", "_charter": {"requestId": rid(), "confirmed": True}}
    waiting = await kit.host.invoke("purge_note", arguments, ALICE)
    assert isinstance(waiting, InteractionRequired) and waiting.approval_id is not None
    await kit.host.approvals.grant(waiting.approval_id, APPROVER)
    asked = await kit.host.resume(waiting, "purge_note", arguments, ALICE)
    assert isinstance(asked, InteractionRequired) and asked.gate == "handler"
    stranger = Principal(subject="alice", tenant_id="globex", scopes=ALICE.scopes)
    taken = await kit.host.resume(asked, "purge_note", arguments, stranger, value={"c": 1})
    assert not isinstance(taken, Completed)
    assert len(kit.answers) == 1
    approval = await kit.host.approvals.get(APPROVER, waiting.approval_id)
    assert approval is not None and approval.status == "approved"


# -- the handler's context -------------------------------------------------------------------


async def test_the_context_without_a_factory_is_the_one_a_plain_factory_gets() -> None:
    # A host without a context factory builds the handler's context in one call; it holds
    # exactly what the host sets on a factory's plain ToolContext.
    seen: list[ToolContext] = []

    async def handler(note: Note, ctx: ToolContext) -> Saved:
        seen.append(ctx)
        return Saved(ok=True, run=len(seen))

    def registry() -> Registry:
        tools = Registry()
        tools.register(
            tiered_tool("look", "read", handler, Note, Saved, description="Look at the context.")
        )
        return tools

    call = CallOptions(
        session_id="s1", turn_id="t1", step_id="p1", call_id="c1", state={"k": 1}, audience=None
    )
    for host in (Host(registry()), Host(registry(), context_factory=lambda *_: ToolContext())):
        for options in (call, CallOptions(invocation_id="inv-1"), None):
            outcome = await host.invoke("look", {"title": "t"}, ALICE, call=options)
            assert isinstance(outcome, Completed)
    plain, factory = seen[:3], seen[3:]
    for one, other in zip(plain, factory, strict=True):
        assert type(one) is type(other) is ToolContext
        mine, theirs = (
            {f.name: getattr(c, f.name) for f in dataclasses.fields(c)} for c in (one, other)
        )
        # Each call has its own cancel signal and, unless the transport named one, its own
        # random invocation id.
        assert isinstance(one.cancel, type(other.cancel)) and one.cancel is not other.cancel
        assert (one.invocation_id == other.invocation_id) == (one.invocation_id == "inv-1")
        for key in ("cancel", "invocation_id"):
            del mine[key], theirs[key]
        assert mine == theirs
    assert plain[0].session_id == "s1" and plain[0].tenant_id == "acme"
