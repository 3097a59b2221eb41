"""The ledger as seen through ``Host.invoke`` with the default in-memory store: request ids,
confirmation, replay, conflicts, and corrected retries after rejections (L03-L10, S06)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel
from tests.builders import DESTRUCTIVE_RISK, WRITE_RISK
from tests.builders import request_id as _rid

from charter import Principal, Registry, RiskPolicy, RiskTier, ToolContext, define_tool
from charter.errors import ErrorCode, ToolError
from charter.host import Host
from charter.ledger import MemoryStore
from charter.outcome import Completed, Failed, InteractionRequired
from charter.policy import ActionPolicy

pytestmark = pytest.mark.anyio

WRITER = Principal(
    subject="user-1",
    tenant_id="tenant-a",
    scopes=frozenset({"notes:write", "notes:delete"}),
)
APPROVER = Principal(subject="boss-1", tenant_id="tenant-a", scopes=frozenset({"charter:approve"}))


class NoteIn(BaseModel):
    title: str
    body: str = ""
    fail: bool = False


class NoteOut(BaseModel):
    note_id: str
    title: str
    run: int


class Kit:
    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []
        registry = Registry()

        async def handler(note: NoteIn, ctx: ToolContext) -> NoteOut:
            if note.fail:
                raise ToolError(ErrorCode.PROVIDER_UNAVAILABLE, "The notes service is down.")
            self.runs.append(note.model_dump())
            return NoteOut(note_id=f"n{len(self.runs)}", title=note.title, run=len(self.runs))

        def add(name: str, tier: RiskTier, risk: RiskPolicy | None, **options: Any) -> None:
            registry.register(
                define_tool(
                    name=name,
                    description=f"The {name} tool.",
                    input_schema=NoteIn,
                    output_schema=NoteOut,
                    handler=handler,
                    tier=tier,
                    risk_policy=risk,
                    **options,
                )
            )

        add("read_note", RiskTier.READ, None)
        add("create_note", RiskTier.WRITE, WRITE_RISK, required_scopes=["notes:write"])
        add("publish_note", RiskTier.SENSITIVE, WRITE_RISK, required_scopes=["notes:write"])
        add("delete_note", RiskTier.DESTRUCTIVE, DESTRUCTIVE_RISK, required_scopes=["notes:delete"])
        # Anonymous callers have no tenant, so a public write tool names its target in
        # its input (the default, tenant-collection target would be blank).
        add(
            "public_note",
            RiskTier.WRITE,
            WRITE_RISK,
            auth="public",
            action_policy=ActionPolicy(target_type="note", command_target_field="title"),
        )
        self.host = Host(registry)
        assert isinstance(self.host.store, MemoryStore)
        self.store: MemoryStore = self.host.store

    async def call(
        self,
        tool: str,
        rid: str | None,
        principal: Principal | None = WRITER,
        **controls: Any,
    ) -> Any:
        arguments: dict[str, Any] = dict(controls.pop("arguments", {"title": "Hello"}))
        if rid is not None:
            controls["requestId"] = rid
        if controls:
            arguments["_charter"] = controls
        return await self.host.invoke(tool, arguments, principal)


async def test_the_default_store_is_in_memory_and_is_also_the_audit_sink() -> None:
    kit = Kit()
    assert kit.host.audit is kit.store
    outcome = await kit.call("create_note", _rid())
    assert isinstance(outcome, Completed)
    assert len(await kit.store.events()) == 1


@pytest.mark.parametrize(
    ("tool", "principal", "controls"),
    [
        ("create_note", WRITER, {}),
        ("publish_note", WRITER, {"confirmed": True}),
        ("public_note", None, {}),
    ],
    ids=["write", "sensitive", "public-write"],
)
async def test_a_tool_that_changes_data_requires_a_request_id(
    tool: str, principal: Principal | None, controls: dict[str, Any]
) -> None:
    kit = Kit()
    outcome = await kit.call(tool, None, principal, **controls)
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.INVALID_INPUT
    assert outcome.reason == "request_id_required"
    assert kit.runs == [] and kit.store.entries == {}
    assert isinstance(await kit.call(tool, _rid(), principal, **controls), Completed)


async def test_a_read_tool_needs_no_request_id_and_leaves_no_row() -> None:
    kit = Kit()
    assert isinstance(await kit.call("read_note", None), Completed)
    assert isinstance(await kit.call("read_note", _rid()), Completed)
    assert kit.store.entries == {}


async def test_a_sensitive_tool_asks_for_confirmation_then_runs_once() -> None:
    kit = Kit()
    rid = _rid()
    first = await kit.call("publish_note", rid)
    assert isinstance(first, InteractionRequired)
    assert first.interaction.kind == "approval"
    assert first.gate == "confirmation" and first.request_id == rid
    assert first.continuation is not None
    assert first.continuation.controls() == {"requestId": rid, "confirmed": True}
    assert kit.runs == [] and kit.store.entries == {}
    confirmed = await kit.call("publish_note", rid, confirmed=True)
    assert isinstance(confirmed, Completed) and confirmed.replayed is False
    again = await kit.call("publish_note", rid, confirmed=True)
    assert isinstance(again, Completed) and again.replayed is True
    assert len(kit.runs) == 1 and len(kit.store.entries) == 1


async def test_an_exact_replay_returns_the_stored_outcome_without_running_the_handler() -> None:
    kit = Kit()
    rid = _rid()
    first = await kit.call("create_note", rid, arguments={"title": "A", "body": "b"})
    # Same call, keys in another order and as raw JSON text: still the same command.
    raw = f'{{"body": "b", "_charter": {{"requestId": "{rid.upper()}"}}, "title": "A"}}'
    replay = await kit.host.invoke("create_note", raw, WRITER)
    assert isinstance(first, Completed) and isinstance(replay, Completed)
    assert replay.replayed is True
    assert replay.output == first.output
    assert len(kit.runs) == 1
    events = await kit.host.audit.events(limit=2)
    assert [e.replayed for e in events] == [True, False]
    assert {e.request_id for e in events} == {rid}


async def test_the_same_request_id_with_different_arguments_is_a_conflict() -> None:
    kit = Kit()
    rid = _rid()
    await kit.call("create_note", rid, arguments={"title": "original secret title"})
    stored = dict(kit.store.entries)
    conflict = await kit.call("create_note", rid, arguments={"title": "changed"})
    assert isinstance(conflict, Failed)
    assert conflict.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert conflict.reason == "idempotency_key_reused"
    assert "original secret title" not in conflict.model_dump_json()
    assert len(kit.runs) == 1 and kit.store.entries == stored


async def test_the_same_request_id_for_another_tool_is_a_conflict() -> None:
    kit = Kit()
    rid = _rid()
    await kit.call("create_note", rid)
    conflict = await kit.call("publish_note", rid, confirmed=True)
    assert isinstance(conflict, Failed) and conflict.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert len(kit.runs) == 1


async def test_request_ids_are_scoped_to_the_tenant() -> None:
    kit = Kit()
    rid = _rid()
    other = Principal(subject="user-1", tenant_id="tenant-b", scopes=WRITER.scopes)
    a = await kit.call("create_note", rid)
    b = await kit.call("create_note", rid, other)
    assert isinstance(a, Completed) and isinstance(b, Completed)
    assert b.replayed is False and len(kit.runs) == 2


# -- L09: rejections before the gate leave no row; the corrected call runs once -------------


async def _corrected_call_runs_once(kit: Kit, rid: str, tool: str = "create_note") -> None:
    assert kit.store.entries == {} and kit.runs == []
    controls: dict[str, Any] = {"confirmed": True} if tool != "create_note" else {}
    fixed = await kit.call(tool, rid, WRITER, **controls)
    assert isinstance(fixed, Completed) and fixed.replayed is False
    replay = await kit.call(tool, rid, WRITER, **controls)
    assert isinstance(replay, Completed) and replay.replayed is True
    assert len(kit.runs) == 1 and len(kit.store.entries) == 1


async def test_a_retry_with_the_same_id_after_invalid_arguments_runs() -> None:
    kit = Kit()
    rid = _rid()
    bad = await kit.call("create_note", rid, arguments={"title": 42, "extra": 1})
    assert isinstance(bad, Failed) and bad.reason == "validation_failed"
    await _corrected_call_runs_once(kit, rid)


async def test_a_retry_with_the_same_id_after_a_missing_scope_runs() -> None:
    kit = Kit()
    rid = _rid()
    weak = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset())
    denied = await kit.call("create_note", rid, weak)
    assert isinstance(denied, Failed) and denied.reason == "insufficient_scope"
    await _corrected_call_runs_once(kit, rid)


async def test_a_retry_with_the_same_id_after_a_missing_confirmation_runs() -> None:
    kit = Kit()
    rid = _rid()
    for unconfirmed in ({}, {"confirmed": "true"}, {"confirmed": 1}):
        assert isinstance(
            await kit.call("publish_note", rid, WRITER, **unconfirmed), InteractionRequired
        )
    await _corrected_call_runs_once(kit, rid, "publish_note")


async def test_a_retry_with_the_same_id_after_invalid_controls_runs() -> None:
    kit = Kit()
    rid = _rid()
    bad = await kit.call("create_note", rid, bogus=True)
    assert isinstance(bad, Failed) and bad.reason == "invalid_controls"
    await _corrected_call_runs_once(kit, rid)


async def test_a_retry_with_the_same_id_after_a_handler_failure_runs() -> None:
    kit = Kit()
    rid = _rid()
    down = await kit.call("create_note", rid, arguments={"title": "Hello", "fail": True})
    assert isinstance(down, Failed) and down.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert down.retryable is True
    # A failed run is rolled back: the id stays free (the arguments differ, so this is
    # only possible because nothing was stored).
    await _corrected_call_runs_once(kit, rid)


async def test_a_retry_with_the_same_id_after_a_missing_or_invalid_approval_runs() -> None:
    kit = Kit()
    rid = _rid()
    bogus = await kit.call("delete_note", rid, confirmed=True, approvalId="apr_bogus")
    assert isinstance(bogus, Failed) and bogus.code is ErrorCode.AUTHORIZATION_DENIED
    asked = await kit.call("delete_note", rid, confirmed=True)
    assert isinstance(asked, InteractionRequired) and asked.gate == "approval"
    approval_id = asked.approval_id
    assert approval_id is not None and approval_id == asked.interaction.id
    early = await kit.call("delete_note", rid, confirmed=True, approvalId=approval_id)
    # Retrying before the grant answers the same pause: still pending, nothing ran.
    assert isinstance(early, InteractionRequired) and early.approval_status == "pending"
    assert early.approval_id == approval_id
    assert kit.store.entries == {} and kit.runs == []
    granted = await kit.host.approvals.grant(approval_id, APPROVER)
    assert not isinstance(granted, Failed)
    done = await kit.call("delete_note", rid, confirmed=True, approvalId=approval_id)
    assert isinstance(done, Completed) and done.replayed is False
    again = await kit.call("delete_note", rid, confirmed=True, approvalId=approval_id)
    assert isinstance(again, Completed) and again.replayed is True
    assert len(kit.runs) == 1


async def test_a_replay_after_the_scope_was_revoked_is_denied_not_replayed() -> None:
    kit = Kit()
    rid = _rid()
    assert isinstance(await kit.call("create_note", rid), Completed)
    revoked = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset())
    outcome = await kit.call("create_note", rid, revoked)
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.AUTHORIZATION_DENIED
    assert "n1" not in outcome.model_dump_json()


@pytest.mark.parametrize("cancellable", [True, False])
async def test_a_handler_that_raises_cancelled_error_itself_fails_and_is_audited(
    cancellable: bool,
) -> None:
    # It awaited a future something else cancelled; nothing cancelled the call, so that is
    # the handler's failure (PROVIDER_ERROR), answered and audited like any other, and the
    # request id stays free for a retry.
    async def handler(note: NoteIn, ctx: ToolContext) -> NoteOut:
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(answer.cancel)
        await answer
        raise AssertionError("unreachable")

    registry = Registry()
    registry.register(
        define_tool(
            name="notes.sync",
            description="Sync a note with a service whose client cancels its own futures.",
            input_schema=NoteIn,
            output_schema=NoteOut,
            handler=handler,
            tier="write",
            risk_policy=WRITE_RISK,
            required_scopes=["notes:write"],
            cancellable=cancellable,
        )
    )
    host = Host(registry)
    request_id = _rid()
    outcome = await host.invoke(
        "notes.sync", {"title": "t", "_charter": {"requestId": request_id}}, WRITER
    )
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.PROVIDER_ERROR, outcome
    [event] = [e for e in await host.audit.events() if e.request_id == request_id]
    assert (event.outcome, event.code) == ("failed", ErrorCode.PROVIDER_ERROR)
