"""Reserved controls (``_charter``): parsed strictly, merged with transport controls, and
never seen by a handler; caller-supplied admissions never reach a handler either."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from tests.builders import WRITE_RISK, tiered_tool
from tests.builders import request_id as _rid

from charter import Principal, RegisteredTool, Registry, ToolContext, define_tool
from charter.errors import ErrorCode
from charter.host import Host
from charter.ledger import MemoryStore
from charter.outcome import Completed, Failed, InteractionRequired
from charter.policy import ActionPolicy, HandlerActionPolicy, InvocationControls

pytestmark = pytest.mark.anyio

PRINCIPAL = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset({"notes:write"}))


class OpenInput(BaseModel):
    """Keeps unknown fields, so anything the host forgot to strip would show up here."""

    model_config = ConfigDict(extra="allow")

    text: str = "x"


class Seen(BaseModel):
    keys: list[str]


def _registry(inputs: list[dict[str, Any]], contexts: list[ToolContext]) -> Registry:
    registry = Registry()

    def add(name: str, **options: Any) -> None:
        async def handler(data: OpenInput, ctx: ToolContext) -> Seen:
            inputs.append(data.model_dump())
            contexts.append(ctx)
            return Seen(keys=sorted(data.model_dump()))

        tier = options.pop("tier", "read")
        registry.register(tiered_tool(name, tier, handler, OpenInput, Seen, **options))

    add("read_note")
    add("write_note", tier="write", risk_policy=WRITE_RISK)
    add("archive_note", tier="sensitive", risk_policy=WRITE_RISK)
    add(
        "ship_order",
        tier="write",
        risk_policy=WRITE_RISK,
        enforcement="handler",
        action_policy=ActionPolicy(target_type="order"),
    )
    return registry


class Kit:
    def __init__(self, **options: Any) -> None:
        self.inputs: list[dict[str, Any]] = []
        self.contexts: list[ToolContext] = []
        self.store = MemoryStore()
        self.host = Host(_registry(self.inputs, self.contexts), store=self.store, **options)


def assert_invalid_controls(outcome: object, reason: str = "invalid_controls") -> Failed:
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.INVALID_INPUT
    assert outcome.reason == reason
    return outcome


# -- strict parsing -------------------------------------------------------------------------


async def test_an_unknown_control_key_is_invalid_input() -> None:
    kit = Kit()
    outcome = await kit.host.invoke(
        "write_note", {"_charter": {"requestId": _rid(), "bogus": 1}}, PRINCIPAL
    )
    failed = assert_invalid_controls(outcome)
    assert failed.meta is not None
    assert failed.meta["issues"] == [
        {
            "loc": ["_charter", "bogus"],
            "msg": "Extra inputs are not permitted",
            "type": "extra_forbidden",
        }
    ]
    assert kit.inputs == [] and kit.store.entries == {}


@pytest.mark.parametrize("raw", ["yes", 1, ["requestId"], True], ids=repr)
async def test_controls_that_are_not_an_object_are_invalid_input(raw: object) -> None:
    kit = Kit()
    assert_invalid_controls(await kit.host.invoke("read_note", {"_charter": raw}, PRINCIPAL))
    assert kit.inputs == []


@pytest.mark.parametrize(
    "request_id",
    ["not-a-uuid", "x" * 10_000, "1234", str(uuid.uuid4()) + "\x00", 42],
    ids=["word", "10kB", "digits", "nul", "int"],
)
async def test_a_request_id_that_is_not_a_uuid_is_invalid_input(request_id: object) -> None:
    kit = Kit()
    outcome = await kit.host.invoke(
        "write_note", {"_charter": {"requestId": request_id}}, PRINCIPAL
    )
    failed = assert_invalid_controls(outcome)
    # The message names the field, never the value.
    assert "x" * 100 not in failed.message
    assert kit.store.entries == {}


@pytest.mark.parametrize("control", ["reasonCode", "approvalId", "onBehalfOf"])
@pytest.mark.parametrize(
    "value",
    ["\u202edevorppa-erp OFC", "CFO\u200b ok", "line\nbreak", "para\u2029graph", "\x00"],
    ids=["bidi-override", "zero-width", "newline", "paragraph-separator", "nul"],
)
async def test_a_control_a_person_would_misread_is_invalid_input(control: str, value: str) -> None:
    # "\u202edevorppa-erp OFC" shows as "CFO pre-approved" to the person deciding.
    kit = Kit()
    outcome = await kit.host.invoke(
        "write_note", {"_charter": {"requestId": _rid(), control: value}}, PRINCIPAL
    )
    failed = assert_invalid_controls(outcome)
    assert failed.meta is not None
    issues = failed.meta["issues"]
    assert isinstance(issues, list) and len(issues) == 1 and isinstance(issues[0], dict)
    assert issues[0]["loc"] == ["_charter", control]
    assert kit.inputs == [] and kit.store.entries == {}


async def test_an_upper_case_request_id_is_the_same_request_in_canonical_form() -> None:
    kit = Kit()
    rid = _rid()
    first = await kit.host.invoke("write_note", {"_charter": {"requestId": rid.upper()}}, PRINCIPAL)
    again = await kit.host.invoke("write_note", {"_charter": {"requestId": rid}}, PRINCIPAL)
    assert isinstance(first, Completed) and isinstance(again, Completed)
    assert again.replayed is True
    assert len(kit.inputs) == 1
    assert [k[2] for k in kit.store.entries] == [rid]
    assert kit.contexts[0].request_id == rid


@pytest.mark.parametrize("confirmed", ["true", "True", 1, 1.0, "yes", "on", False, None, {}])
async def test_confirmed_counts_only_as_boolean_true(confirmed: object) -> None:
    kit = Kit()
    rid = _rid()
    outcome = await kit.host.invoke(
        "archive_note", {"_charter": {"requestId": rid, "confirmed": confirmed}}, PRINCIPAL
    )
    assert isinstance(outcome, InteractionRequired)
    assert kit.inputs == [] and kit.store.entries == {}
    confirmed_call = await kit.host.invoke(
        "archive_note", {"_charter": {"requestId": rid, "confirmed": True}}, PRINCIPAL
    )
    assert isinstance(confirmed_call, Completed)
    assert len(kit.inputs) == 1


async def test_a_control_the_tool_does_not_accept_is_invalid_input() -> None:
    kit = Kit()
    outcome = await kit.host.invoke("read_note", {"_charter": {"approvalId": "apr_1"}}, PRINCIPAL)
    failed = assert_invalid_controls(outcome, "control_not_accepted")
    assert failed.meta is not None and "approvalId" not in failed.meta["accepted"]  # type: ignore[operator]
    assert kit.inputs == []


async def test_null_controls_are_refused_as_the_manifest_publishes_an_object() -> None:
    kit = Kit()
    outcome = await kit.host.invoke("read_note", {"_charter": None}, PRINCIPAL)
    assert isinstance(outcome, Failed) and outcome.code == ErrorCode.INVALID_INPUT
    assert outcome.reason == "invalid_controls"
    assert kit.inputs == []


# -- controls never reach the handler -------------------------------------------------------


async def test_the_reserved_controls_never_reach_the_handlers_input() -> None:
    kit = Kit()
    controls = {"requestId": _rid(), "confirmed": True, "reasonCode": "user_asked"}
    outcome = await kit.host.invoke(
        "archive_note", {"text": "keep", "_charter": controls}, PRINCIPAL
    )
    assert isinstance(outcome, Completed)
    # The input model keeps unknown fields: _charter would be here if it had leaked.
    assert kit.inputs == [{"text": "keep"}]
    assert outcome.output == {"keys": ["text"]}
    ctx = kit.contexts[0]
    assert ctx.request_id == controls["requestId"]


async def test_raw_json_controls_are_stripped_the_same_way() -> None:
    kit = Kit()
    rid = _rid()
    raw = f'{{"text": "raw", "_charter": {{"requestId": "{rid}"}}}}'
    for payload in (raw, raw.encode()):
        outcome = await kit.host.invoke("write_note", payload, PRINCIPAL)
        assert isinstance(outcome, Completed)
    assert kit.inputs == [{"text": "raw"}]  # the second call replayed


async def test_the_callers_arguments_are_not_mutated() -> None:
    kit = Kit()
    arguments = {"text": "x", "_charter": {"requestId": _rid()}}
    snapshot = {"text": "x", "_charter": dict(arguments["_charter"])}  # type: ignore[arg-type]
    assert isinstance(await kit.host.invoke("write_note", arguments, PRINCIPAL), Completed)
    assert arguments == snapshot


# -- transport controls (controls=) and _charter must agree ---------------------------------


async def test_transport_controls_alone_are_used() -> None:
    kit = Kit()
    rid = _rid()
    outcome = await kit.host.invoke(
        "write_note", {}, PRINCIPAL, controls=InvocationControls(request_id=uuid.UUID(rid))
    )
    assert isinstance(outcome, Completed)
    assert [k[2] for k in kit.store.entries] == [rid]


async def test_the_same_control_in_both_places_must_agree() -> None:
    kit = Kit()
    rid = _rid()
    conflict = await kit.host.invoke(
        "write_note",
        {"_charter": {"requestId": _rid()}},
        PRINCIPAL,
        controls=InvocationControls(request_id=uuid.UUID(rid)),
    )
    failed = assert_invalid_controls(conflict, "controls_conflict")
    assert failed.meta is not None and failed.meta["control"] == "requestId"
    assert kit.inputs == [] and kit.store.entries == {}
    agree = await kit.host.invoke(
        "write_note",
        {"_charter": {"requestId": rid.upper(), "reasonCode": "r"}},
        PRINCIPAL,
        controls=InvocationControls(request_id=uuid.UUID(rid)),
    )
    assert isinstance(agree, Completed)


async def test_confirmation_given_differently_in_both_places_is_a_conflict() -> None:
    kit = Kit()
    outcome = await kit.host.invoke(
        "archive_note",
        {"_charter": {"requestId": _rid(), "confirmed": "true"}},
        PRINCIPAL,
        controls=InvocationControls(confirmed=True),
    )
    failed = assert_invalid_controls(outcome, "controls_conflict")
    assert failed.meta is not None and failed.meta["control"] == "confirmed"
    assert kit.inputs == []


# -- admissions supplied by a caller never reach a handler ---------------------------------


def _stolen_admission(host: Host) -> HandlerActionPolicy:
    """A genuine admission minted by the registry, for a call that is not the current one."""
    registered = host.registry.get("ship_order")
    assert registered is not None
    return host.registry.mint_handler_policy(registered, InvocationControls())


async def test_an_admission_from_the_context_factory_never_reaches_a_generic_handler() -> None:
    holder: dict[str, HandlerActionPolicy] = {}

    def factory(
        principal: Principal | None, registered: RegisteredTool, controls: InvocationControls
    ) -> ToolContext:
        return ToolContext(handler_action_policy=holder["admission"])

    kit = Kit(context_factory=factory)
    holder["admission"] = _stolen_admission(kit.host)
    outcome = await kit.host.invoke("read_note", {}, PRINCIPAL)
    assert isinstance(outcome, Completed)
    assert kit.contexts[0].handler_action_policy is None


async def test_a_handler_enforced_tool_gets_a_fresh_admission_not_the_one_supplied() -> None:
    holder: dict[str, HandlerActionPolicy] = {}

    async def factory(
        principal: Principal | None, registered: RegisteredTool, controls: InvocationControls
    ) -> ToolContext:
        return ToolContext(handler_action_policy=holder["admission"])

    kit = Kit(context_factory=factory)
    holder["admission"] = _stolen_admission(kit.host)
    rid = _rid()
    outcome = await kit.host.invoke("ship_order", {"_charter": {"requestId": rid}}, PRINCIPAL)
    assert isinstance(outcome, Completed)
    admission = kit.contexts[0].handler_action_policy
    assert admission is not None and admission is not holder["admission"]
    assert admission.canonical_name == "ship_order"
    assert admission.controls.request_key == rid


async def test_an_admission_cannot_be_smuggled_in_through_the_arguments() -> None:
    kit = Kit()
    registry = kit.host.registry

    class Closed(BaseModel):
        text: str = "x"

    async def closed(data: Closed) -> Seen:
        return Seen(keys=[])

    registry.register(
        define_tool(
            name="closed_note",
            description="A tool whose input is closed to unknown fields.",
            input_schema=Closed,
            output_schema=Seen,
            handler=closed,
            tier="read",
        )
    )
    smuggled = await kit.host.invoke(
        "closed_note", {"handler_action_policy": {"capability_id": "ship_order"}}, PRINCIPAL
    )
    assert isinstance(smuggled, Failed) and smuggled.code is ErrorCode.INVALID_INPUT
    in_controls = await kit.host.invoke(
        "ship_order",
        {"_charter": {"requestId": _rid(), "handlerActionPolicy": {"canonicalName": "x"}}},
        PRINCIPAL,
    )
    assert_invalid_controls(in_controls)
    assert kit.store.entries == {}
