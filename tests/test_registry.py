from __future__ import annotations

import copy
import dataclasses
import gc
import logging
import re
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from pydantic import BaseModel, computed_field, field_validator
from tests.builders import WRITE_RISK

from charter import (
    Completed,
    Deferred,
    Denied,
    Failed,
    PreparedAction,
    RegisteredTool,
    Registry,
    Tool,
    ToolBinding,
    ToolContext,
    define_tool,
)
from charter.errors import ConfigurationError, ErrorCode, ToolError
from charter.outcome import Interaction, InteractionRequired, outcome_adapter
from charter.policy import ActionPolicy, HandlerActionPolicy, InvocationControls

CANARY = "canary-7f3a9c-secret"


class EchoIn(BaseModel):
    text: str


class EchoOut(BaseModel):
    text: str


class RecordIn(BaseModel):
    record_id: str
    note: str = ""


class CountIn(BaseModel):
    count: int


def echo(args: EchoIn) -> EchoOut:
    return EchoOut(text=args.text)


def make(name: str = "echo", handler: Any = echo, **options: Any) -> Tool[Any, Any, Any]:
    options.setdefault("description", f"The {name} tool.")
    options.setdefault("input_schema", EchoIn)
    options.setdefault("output_schema", EchoOut)
    options.setdefault("tier", "read")
    return define_tool(name=name, handler=handler, **options)


def write_tool(
    name: str = "records.update", handler: Any = None, **options: Any
) -> Tool[Any, Any, Any]:
    def update(args: RecordIn) -> EchoOut:
        return EchoOut(text=args.record_id)

    options.setdefault("input_schema", RecordIn)
    options.setdefault("tier", "write")
    options.setdefault("risk_policy", WRITE_RISK)
    return make(name, handler or update, **options)


def ctx(**fields: Any) -> ToolContext:
    fields.setdefault("tenant_id", "tenant-1")
    return ToolContext(**fields)


def failure(outcome: object) -> Failed:
    assert isinstance(outcome, Failed), outcome
    return outcome


async def failed_call(tool: Tool[Any, Any, Any]) -> Failed:
    """Dispatch ``tool`` alone with ``text="x"``; the outcome, which must be a failure."""
    registry = Registry()
    registry.register(tool)
    return failure(await registry.dispatch(tool.name, {"text": "x"}, ctx()))


async def cancelled_once_started(
    tool: Tool[Any, Any, Any], started: Callable[[], Awaitable[object]]
) -> object:
    """Dispatch ``tool`` and set its context's cancel signal once ``started()`` returns."""
    registry = Registry()
    registry.register(tool)
    call_ctx = ctx()
    outcomes: list[object] = []

    async def call() -> None:
        outcomes.append(await registry.dispatch(tool.name, {"text": "x"}, call_ctx))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await started()
            call_ctx.cancel.set()
    registry.close()
    [outcome] = outcomes
    return outcome


def meta(outcome: object) -> dict[str, Any]:
    assert failure(outcome).meta is not None
    return dict(failure(outcome).meta or {})


def dumped(outcome: Any) -> str:
    return outcome_adapter.dump_json(outcome).decode()


# -- registration and lookup ------------------------------------------------------------------


def test_get_finds_a_tool_by_name_and_by_alias() -> None:
    registry = Registry()
    registered = registry.register(make("echo", aliases=["say"]))
    assert registry.get("echo") is registered
    assert registry.get("say") is registered
    assert registry.get("nope") is None


def test_names_are_canonical_names_in_registration_order() -> None:
    registry = Registry()
    registry.register(make("zeta", aliases=["z"]))
    registry.register_all([make("alpha"), make("mid")])
    assert registry.names() == ["zeta", "alpha", "mid"]
    assert [entry["name"] for entry in registry.list()] == ["zeta", "alpha", "mid"]


def test_register_all_returns_the_registered_tools_in_order() -> None:
    registered = Registry().register_all([make("a"), make("b")])
    assert [r.name for r in registered] == ["a", "b"]


def test_list_filters_by_audience_and_lists_everything_without_one() -> None:
    registry = Registry()
    registry.register(make("everyone"))
    registry.register(make("staff_only", audience=["staff"]))
    registry.register(make("partners", audience=["partner", "staff"]))
    assert [e["name"] for e in registry.list()] == ["everyone", "staff_only", "partners"]
    assert [e["name"] for e in registry.list("customer")] == ["everyone"]
    assert [e["name"] for e in registry.list("partner")] == ["everyone", "partners"]
    assert [e["name"] for e in registry.list("staff")] == ["everyone", "staff_only", "partners"]


def test_get_by_capability_finds_an_exact_version_or_none() -> None:
    registry = Registry()
    v1 = registry.register(make("echo_v1", capability_id="echo", capability_version="1.0.0"))
    v2 = registry.register(make("echo_v2", capability_id="echo", capability_version="2.0.0"))
    assert registry.get_by_capability("echo", "1.0.0") is v1
    assert registry.get_by_capability("echo", "2.0.0") is v2
    assert registry.get_by_capability("echo", "3.0.0") is None
    assert registry.get_by_capability("other") is None


def test_get_by_capability_without_a_version_gives_the_highest_semver() -> None:
    registry = Registry()
    registry.register(make("echo_9", capability_id="echo", capability_version="1.9.0"))
    highest = registry.register(make("echo_10", capability_id="echo", capability_version="1.10.0"))
    registry.register(make("echo_2", capability_id="echo", capability_version="1.2.0"))
    assert registry.get_by_capability("echo") is highest


def test_a_release_outranks_its_pre_releases() -> None:
    registry = Registry()
    release = registry.register(make("r", capability_id="echo", capability_version="2.0.0"))
    registry.register(make("rc", capability_id="echo", capability_version="2.0.0-rc.1"))
    registry.register(make("old", capability_id="echo", capability_version="1.5.0"))
    assert registry.get_by_capability("echo") is release


def test_registering_the_same_name_twice_is_rejected() -> None:
    registry = Registry()
    registry.register(make("echo"))
    with pytest.raises(ConfigurationError, match="invocation name 'echo' is already registered"):
        registry.register(make("echo", capability_id="other"))


def test_an_alias_that_collides_with_another_tools_name_is_rejected() -> None:
    registry = Registry()
    registry.register(make("echo"))
    with pytest.raises(ConfigurationError, match="invocation name 'echo' is already registered"):
        registry.register(make("repeat", aliases=["echo"]))
    assert registry.get("repeat") is None


def test_a_name_that_collides_with_another_tools_alias_is_rejected() -> None:
    registry = Registry()
    registry.register(make("echo", aliases=["say"]))
    with pytest.raises(ConfigurationError, match="invocation name 'say' is already registered"):
        registry.register(make("say"))


def test_the_same_capability_and_version_twice_is_rejected() -> None:
    registry = Registry()
    registry.register(make("echo_a", capability_id="echo", capability_version="1"))
    with pytest.raises(ConfigurationError, match="capability 'echo' version '1' is already"):
        registry.register(make("echo_b", capability_id="echo", capability_version="1"))
    assert registry.names() == ["echo_a"]


def test_identity_defaults_to_the_name_unbound_and_v1() -> None:
    registered = Registry().register(make("echo"))
    assert (registered.capability_id, registered.owner, registered.capability_version) == (
        "echo",
        "unbound",
        "v1",
    )


def test_the_binding_fills_in_identity_the_definition_leaves_out() -> None:
    binding = ToolBinding(
        capability_id="demo.echo", owner="demo", capability_version="1.2.0", aliases=("say",)
    )
    registry = Registry()
    registered = registry.register(make("echo", aliases=["repeat"]), binding)
    assert registered.capability_id == "demo.echo"
    assert registered.owner == "demo"
    assert registered.capability_version == "1.2.0"
    assert registered.aliases == ("say", "repeat")
    assert registry.get("say") is registered
    assert registry.get_by_capability("demo.echo", "1.2.0") is registered


@pytest.mark.parametrize(
    ("field", "defined", "bound"),
    [
        ("name", "echo", "other"),
        ("capability_id", "demo.echo", "demo.other"),
        ("owner", "demo", "someone"),
        ("capability_version", "1.0.0", "2.0.0"),
    ],
)
def test_a_binding_that_disagrees_with_the_definition_is_rejected_naming_the_field(
    field: str, defined: str, bound: str
) -> None:
    definition = {} if field == "name" else {field: defined}
    binding: dict[str, Any] = {field: bound}
    with pytest.raises(ConfigurationError, match=f"{field} '{defined}' does not match"):
        Registry().register(make("echo", **definition), ToolBinding(**binding))


def test_binding_scopes_must_match_the_definition_as_a_set() -> None:
    defined = make("echo", required_scopes=["trips:read", "trips:list"])
    same = ToolBinding(required_scopes=("trips:list", "trips:read", "trips:list"))
    assert Registry().register(defined, same).required_scopes == ("trips:read", "trips:list")
    with pytest.raises(ConfigurationError, match=r"required_scopes .* do not match the binding"):
        Registry().register(defined, ToolBinding(required_scopes=("trips:read",)))


def test_a_binding_action_policy_that_disagrees_is_rejected() -> None:
    defined = write_tool(action_policy=ActionPolicy(target_type="record"))
    binding = ToolBinding(action_policy=ActionPolicy(target_type="other"))
    with pytest.raises(ConfigurationError, match="action_policy does not match"):
        Registry().register(defined, binding)


def test_a_binding_may_supply_the_action_policy() -> None:
    policy = ActionPolicy(target_type="record", command_target_field="record_id")
    registered = Registry().register(write_tool(), ToolBinding(action_policy=policy))
    assert registered.action_policy == policy
    assert registered.target_resolution == "command-target-field"


def test_a_binding_alias_outside_the_name_pattern_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="alias 'bad alias' must use 1-128"):
        Registry().register(make("echo"), ToolBinding(aliases=("bad alias",)))


def test_a_binding_alias_equal_to_the_name_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="alias repeats the canonical name"):
        Registry().register(make("echo"), ToolBinding(aliases=("echo",)))


def test_a_command_target_field_must_be_an_input_field() -> None:
    policy = ActionPolicy(target_type="record", command_target_field="missing")
    with pytest.raises(ConfigurationError, match="command_target_field 'missing' is not a field"):
        Registry().register(write_tool(action_policy=policy))


def test_a_public_tool_whose_target_is_the_callers_tenant_is_refused_at_registration() -> None:
    # An anonymous caller has no tenant, so the default "{target_type}:{tenant}" target
    # could never resolve: every anonymous call would fail. Registration says so instead.
    with pytest.raises(ConfigurationError, match="public tool with an action policy") as info:
        Registry().register(write_tool(auth="public"))
    assert "command_target_field" in str(info.value)
    assert "resolve_action_target" in str(info.value)


def test_a_public_write_tool_that_names_its_target_is_registered() -> None:
    policy = ActionPolicy(target_type="record", command_target_field="record_id")
    registry = Registry()
    registered = registry.register(write_tool(auth="public", action_policy=policy))
    assert registered.target_resolution == "command-target-field"


# -- prepare_action ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_prepare_validates_once_and_the_resolver_and_handler_see_the_parsed_value() -> None:
    validations: list[str] = []
    seen: dict[str, str] = {}

    class Shouting(BaseModel):
        record_id: str

        @field_validator("record_id")
        @classmethod
        def shout(cls, value: str) -> str:
            validations.append(value)
            return value.upper() + "!"

    def resolve(args: Shouting, ctx: ToolContext) -> str:
        seen["resolver"] = args.record_id
        return args.record_id

    def handler(args: Shouting) -> EchoOut:
        seen["handler"] = args.record_id
        return EchoOut(text=args.record_id)

    registry = Registry()
    registry.register(
        write_tool(
            handler=handler,
            input_schema=Shouting,
            resolve_action_target=resolve,
            action_policy=ActionPolicy(target_type="record"),
        )
    )
    prepared = await registry.prepare_action("records.update", {"record_id": "r1"}, ctx())
    assert isinstance(prepared, PreparedAction)
    assert prepared.target == "R1!"
    assert prepared.arguments == {"record_id": "R1!"}
    outcome = await registry.dispatch_prepared(prepared, ctx())
    assert outcome == Completed(output={"text": "R1!"})
    assert seen == {"resolver": "R1!", "handler": "R1!"}
    assert validations == ["r1"]


@pytest.mark.anyio
async def test_the_resolver_is_never_called_on_invalid_input() -> None:
    calls: list[object] = []

    def resolve(args: RecordIn, ctx: ToolContext) -> str:
        calls.append(args)
        return "x"

    registry = Registry()
    registry.register(write_tool(resolve_action_target=resolve))
    outcome = await registry.prepare_action("records.update", {"record_id": 42}, ctx())
    assert failure(outcome).code is ErrorCode.INVALID_INPUT
    assert calls == []


@pytest.mark.anyio
async def test_an_async_resolver_is_awaited() -> None:
    async def resolve(args: RecordIn, ctx: ToolContext) -> str:
        return f"  booking:{args.record_id}  "

    registry = Registry()
    registered = registry.register(write_tool(resolve_action_target=resolve))
    assert registered.target_resolution == "package-resolver"
    prepared = await registry.prepare_action("records.update", {"record_id": "b1"}, ctx())
    assert isinstance(prepared, PreparedAction)
    assert prepared.target == "booking:b1"


@pytest.mark.anyio
async def test_the_command_target_field_is_trimmed() -> None:
    registry = Registry()
    policy = ActionPolicy(target_type="record", command_target_field="record_id")
    registry.register(write_tool(action_policy=policy))
    prepared = await registry.prepare_action("records.update", {"record_id": " r-1 \n"}, ctx())
    assert isinstance(prepared, PreparedAction)
    assert prepared.target == "r-1"
    assert prepared.arguments["record_id"] == " r-1 \n"


@pytest.mark.anyio
async def test_a_blank_command_target_field_is_action_policy_required() -> None:
    registry = Registry()
    policy = ActionPolicy(target_type="record", command_target_field="record_id")
    registry.register(write_tool(action_policy=policy))
    outcome = failure(await registry.prepare_action("records.update", {"record_id": "  "}, ctx()))
    assert outcome.code is ErrorCode.ACTION_POLICY_REQUIRED
    assert outcome.meta == {
        "reason": "target_unresolved",
        "capabilityId": "records.update",
        "targetResolution": "command-target-field",
        "commandTargetField": "record_id",
    }


@pytest.mark.anyio
async def test_without_resolver_or_field_the_target_is_the_tenant_collection_anchor() -> None:
    registry = Registry()
    registered = registry.register(write_tool())
    assert registered.target_resolution == "tenant-collection"
    prepared = await registry.prepare_action(
        "records.update", {"record_id": "r1"}, ctx(tenant_id=" org-1 ")
    )
    assert isinstance(prepared, PreparedAction)
    # The default policy's target type is the capability id.
    assert prepared.target == "records.update:org-1"


@pytest.mark.anyio
async def test_a_read_action_policy_anchors_on_its_target_type_and_tenant() -> None:
    registry = Registry()
    policy = ActionPolicy(kind="read", target_type="record", ledger="required")
    registry.register(make("records.read", input_schema=RecordIn, action_policy=policy))
    prepared = await registry.prepare_action("records.read", {"record_id": "r"}, ctx())
    assert isinstance(prepared, PreparedAction)
    assert prepared.target == "record:tenant-1"


@pytest.mark.anyio
@pytest.mark.parametrize("tenant", ["", "   "])
async def test_a_blank_tenant_is_action_policy_required(tenant: str) -> None:
    registry = Registry()
    registry.register(write_tool())
    outcome = await registry.prepare_action(
        "records.update", {"record_id": "r1"}, ctx(tenant_id=tenant)
    )
    assert failure(outcome).code is ErrorCode.ACTION_POLICY_REQUIRED
    assert meta(outcome)["targetResolution"] == "tenant-collection"


@pytest.mark.anyio
@pytest.mark.parametrize("result", ["", "  ", None, 42, ["r1"]])
async def test_a_blank_or_non_string_resolver_result_is_action_policy_required(
    result: object,
) -> None:
    def resolve(args: RecordIn, ctx: ToolContext) -> Any:
        return result

    registry = Registry()
    registry.register(write_tool(resolve_action_target=resolve))
    outcome = failure(await registry.prepare_action("records.update", {"record_id": "r"}, ctx()))
    assert outcome.code is ErrorCode.ACTION_POLICY_REQUIRED
    assert outcome.reason == "target_unresolved"
    assert meta(outcome)["targetResolution"] == "package-resolver"


@pytest.mark.anyio
async def test_a_resolver_tool_error_keeps_its_code_and_other_errors_become_provider_errors() -> (
    None
):
    def refuse(args: RecordIn, ctx: ToolContext) -> str:
        if args.record_id == "missing":
            raise ToolError(ErrorCode.NOT_FOUND, "No such record.")
        raise RuntimeError(CANARY)

    registry = Registry()
    registry.register(write_tool(resolve_action_target=refuse))
    missing = await registry.prepare_action("records.update", {"record_id": "missing"}, ctx())
    assert failure(missing).code is ErrorCode.NOT_FOUND
    broken = await registry.prepare_action("records.update", {"record_id": "x"}, ctx())
    assert failure(broken).code is ErrorCode.PROVIDER_ERROR
    assert CANARY not in dumped(broken)


async def prepared_echo() -> tuple[Registry, PreparedAction]:
    """A registry with the read tool ``echo`` and its prepared call with ``text="hi"``."""
    registry = Registry()
    registry.register(make("echo"))
    prepared = await registry.prepare_action("echo", {"text": "hi"}, ctx())
    assert isinstance(prepared, PreparedAction)
    return registry, prepared


@pytest.mark.anyio
async def test_a_read_tool_without_a_policy_prepares_without_a_target() -> None:
    _, prepared = await prepared_echo()
    assert prepared.target is None


# -- prepared actions are single-use -------------------------------------------------------


@pytest.mark.anyio
async def test_a_prepared_action_runs_once() -> None:
    registry, prepared = await prepared_echo()
    assert await registry.dispatch_prepared(prepared, ctx()) == Completed(output={"text": "hi"})
    again = failure(await registry.dispatch_prepared(prepared, ctx()))
    assert again.code is ErrorCode.ACTION_POLICY_REQUIRED
    assert again.reason == "prepared_action_not_admitted"


@pytest.mark.anyio
async def test_a_copied_prepared_action_is_refused() -> None:
    registry, prepared = await prepared_echo()
    for forged in (copy.copy(prepared), dataclasses.replace(prepared)):
        outcome = failure(await registry.dispatch_prepared(forged, ctx()))
        assert outcome.code is ErrorCode.ACTION_POLICY_REQUIRED
    # The original is still good: refusing the copies did not consume it.
    assert await registry.dispatch_prepared(prepared, ctx()) == Completed(output={"text": "hi"})


@pytest.mark.anyio
async def test_the_registry_does_not_keep_a_prepared_action_alive() -> None:
    registry = Registry()
    registry.register(make("echo"))
    prepared = await registry.prepare_action("echo", {"text": "hi"}, ctx())
    assert isinstance(prepared, PreparedAction)
    held = weakref.ref(prepared)
    del prepared
    gc.collect()
    assert held() is None


@pytest.mark.anyio
async def test_another_registry_refuses_a_prepared_action() -> None:
    _, prepared = await prepared_echo()
    second = Registry()
    second.register(make("echo"))
    outcome = failure(await second.dispatch_prepared(prepared, ctx()))
    assert outcome.code is ErrorCode.ACTION_POLICY_REQUIRED


# -- dispatch outcomes ----------------------------------------------------------------------


class Shout(BaseModel):
    text: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def loud(self) -> str:
        return self.text.upper()


@pytest.mark.anyio
async def test_a_dict_output_has_its_computed_fields_recomputed_not_refused() -> None:
    def shout(args: EchoIn) -> dict[str, str]:
        return {"text": args.text, "loud": "stale"}

    registry = Registry()
    registry.register(make("shout", shout, output_schema=Shout))
    outcome = await registry.dispatch("shout", {"text": "hi"}, ctx())
    assert outcome == Completed(output={"text": "hi", "loud": "HI"})


@pytest.mark.anyio
async def test_dispatch_by_alias_runs_the_tool() -> None:
    registry = Registry()
    registry.register(make("echo", aliases=["say"]))
    assert await registry.dispatch("say", {"text": "hi"}, ctx()) == Completed(output={"text": "hi"})


@pytest.mark.anyio
async def test_a_tool_error_keeps_its_code_meta_and_next_steps() -> None:
    def handler(args: EchoIn) -> EchoOut:
        raise ToolError(
            ErrorCode.PROVIDER_UNAVAILABLE,
            "The booking system is down.",
            meta={"reason": "upstream_down", "system": "gds"},
            next_steps=["Wait five minutes.", "Retry the same call."],
        )

    outcome = await failed_call(make("book", handler))
    assert outcome.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert outcome.message == "The booking system is down."
    assert outcome.meta == {"reason": "upstream_down", "system": "gds"}
    assert outcome.next_steps == ("Wait five minutes.", "Retry the same call.")
    assert outcome.retryable is True


@pytest.mark.anyio
async def test_any_other_exception_is_a_provider_error_that_hides_the_message_and_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def handler(args: EchoIn) -> EchoOut:
        raise RuntimeError(f"database password is {CANARY}")

    with caplog.at_level(logging.ERROR, logger="charter"):
        outcome = await failed_call(make("leaky", handler))
    assert outcome.code is ErrorCode.PROVIDER_ERROR
    assert outcome.retryable is False
    error_id = meta(outcome)["errorId"]
    assert re.fullmatch(r"err_[0-9a-f]{16}", error_id)
    assert error_id in outcome.message
    assert CANARY not in dumped(outcome)
    [record] = [r for r in caplog.records if error_id in r.getMessage()]
    assert record.exc_info is not None
    assert CANARY in caplog.text


@pytest.mark.anyio
async def test_an_async_handler_exception_is_a_provider_error_too() -> None:
    async def handler(args: EchoIn) -> EchoOut:
        raise KeyError(CANARY)

    outcome = await failed_call(make("leaky", handler))
    assert outcome.code is ErrorCode.PROVIDER_ERROR
    assert CANARY not in dumped(outcome)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "loc", "kind"),
    [
        ({"count": CANARY}, ["count"], "int_type"),  # strict: a string is no integer
        ({"count": 1, "smuggled": CANARY}, ["smuggled"], "extra_forbidden"),
        ({}, ["count"], "missing"),
        ({"count": [CANARY]}, ["count"], "int_type"),
    ],
)
async def test_invalid_input_lists_issues_without_the_offending_values(
    arguments: dict[str, Any], loc: list[str], kind: str
) -> None:
    def handler(args: CountIn) -> EchoOut:
        raise AssertionError("the handler must not run")

    registry = Registry()
    registry.register(make("count", handler, input_schema=CountIn))
    outcome = failure(await registry.dispatch("count", arguments, ctx()))
    assert outcome.code is ErrorCode.INVALID_INPUT
    [issue] = meta(outcome)["issues"]
    assert issue["loc"] == loc
    assert issue["type"] == kind
    assert set(issue) == {"loc", "msg", "type"}
    assert CANARY not in dumped(outcome)
    assert outcome.message.startswith("Invalid input for tool 'count':")


@pytest.mark.anyio
@pytest.mark.parametrize("arguments", [None, [], "text", 3])
async def test_arguments_that_are_not_an_object_are_invalid_input(arguments: object) -> None:
    registry = Registry()
    registry.register(make("echo"))
    outcome = failure(await registry.dispatch("echo", arguments, ctx()))
    assert outcome.code is ErrorCode.INVALID_INPUT
    assert outcome.reason == "not_an_object"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "output",
    [
        {"text": 5},
        {},
        {"text": "fine", "secret": CANARY},
        CountIn.model_construct(count=CANARY),  # type: ignore[arg-type]
        RecordIn(record_id=CANARY),
        EchoOut.model_construct(text=[CANARY]),  # type: ignore[arg-type]
        None,
        CANARY,
        Completed(output={"text": "fine", "secret": CANARY}),
    ],
    ids=[
        "wrong-type",
        "missing-field",
        "extra-field",
        "other-model-unserialisable",
        "other-model",
        "unvalidated-model",
        "none",
        "string",
        "completed-extra-field",
    ],
)
async def test_invalid_output_is_invalid_output_and_never_reaches_the_caller(
    output: object, caplog: pytest.LogCaptureFixture
) -> None:
    def handler(args: EchoIn) -> Any:
        return output

    with caplog.at_level(logging.ERROR, logger="charter"):
        outcome = await failed_call(make("bad", handler))
    assert outcome.code is ErrorCode.INVALID_OUTPUT
    assert outcome.retryable is False
    assert "errorId" in meta(outcome)
    assert CANARY not in dumped(outcome)
    assert CANARY not in caplog.text


@pytest.mark.anyio
async def test_other_model_with_the_same_fields_is_valid_output() -> None:
    class Lookalike(BaseModel):
        text: str

    registry = Registry()
    registry.register(make("echo", lambda args: Lookalike(text=args.text)))
    assert await registry.dispatch("echo", {"text": "a"}, ctx()) == Completed(output={"text": "a"})


@pytest.mark.anyio
async def test_a_slow_async_handler_times_out_and_is_retryable() -> None:
    never = anyio.Event()

    async def handler(args: EchoIn) -> EchoOut:
        await never.wait()
        return EchoOut(text="too late")

    registry = Registry()
    registry.register(make("slow", handler, timeout=0.01))
    with anyio.fail_after(5):
        outcome = failure(await registry.dispatch("slow", {"text": "x"}, ctx()))
    assert outcome.code is ErrorCode.TIMEOUT
    assert outcome.retryable is True


@pytest.mark.anyio
async def test_a_slow_sync_handler_times_out_and_sees_the_cancel_signal() -> None:
    saw_cancel = threading.Event()

    def handler(args: EchoIn, ctx: ToolContext) -> EchoOut:
        if ctx.cancel.wait_sync(timeout=5):
            saw_cancel.set()
        return EchoOut(text="stopped")

    registry = Registry()
    registry.register(make("slow", handler, timeout=0.01))
    with anyio.fail_after(5):
        outcome = failure(await registry.dispatch("slow", {"text": "x"}, ctx()))
        assert await anyio.to_thread.run_sync(saw_cancel.wait, 5)
    assert outcome.code is ErrorCode.TIMEOUT
    assert outcome.retryable is True
    registry.close()


@pytest.mark.anyio
async def test_cancelling_an_async_handler_through_the_context_is_cancelled() -> None:
    started = anyio.Event()

    async def handler(args: EchoIn) -> EchoOut:
        started.set()
        await anyio.Event().wait()
        return EchoOut(text="never")

    outcome = await cancelled_once_started(make("wait", handler), started.wait)
    assert failure(outcome).code is ErrorCode.CANCELLED
    assert failure(outcome).retryable is False


@pytest.mark.anyio
async def test_cancelling_a_sync_handler_through_the_context_is_cancelled() -> None:
    started = threading.Event()
    saw_cancel = threading.Event()

    def handler(args: EchoIn, ctx: ToolContext) -> EchoOut:
        started.set()
        if ctx.cancel.wait_sync(timeout=5):
            saw_cancel.set()
        return EchoOut(text="stopped")

    async def handler_started() -> None:
        assert await anyio.to_thread.run_sync(started.wait, 5)

    outcome = await cancelled_once_started(make("wait", handler), handler_started)
    assert await anyio.to_thread.run_sync(saw_cancel.wait, 5)
    assert failure(outcome).code is ErrorCode.CANCELLED


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [True, False])
async def test_a_call_cancelled_before_it_starts_never_runs_the_handler(is_async: bool) -> None:
    ran: list[bool] = []

    def sync_handler(args: EchoIn) -> EchoOut:
        ran.append(True)
        return EchoOut(text="ran")

    async def async_handler(args: EchoIn) -> EchoOut:
        return sync_handler(args)

    registry = Registry()
    registry.register(make("echo", async_handler if is_async else sync_handler))
    call_ctx = ctx()
    call_ctx.cancel.set()
    outcome = failure(await registry.dispatch("echo", {"text": "x"}, call_ctx))
    assert outcome.code is ErrorCode.CANCELLED
    assert ran == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "returned",
    [
        Denied(reason="The traveller declined."),
        InteractionRequired(
            interaction=Interaction(id="ask-1", kind="response", prompt="Which seat?"),
            token={"step": 2},
        ),
        Deferred(token="job-17"),
        Failed(code=ErrorCode.PROVIDER_UNAVAILABLE, message="Later.", retryable=True),
    ],
)
async def test_a_handler_returning_an_outcome_passes_it_through(returned: object) -> None:
    registry = Registry()
    registry.register(make("echo", lambda args: returned))
    assert await registry.dispatch("echo", {"text": "x"}, ctx()) is returned


@pytest.mark.anyio
async def test_a_handler_returning_completed_has_its_output_validated() -> None:
    registry = Registry()
    registry.register(make("echo", lambda args: Completed(output={"text": args.text})))
    assert await registry.dispatch("echo", {"text": "x"}, ctx()) == Completed(output={"text": "x"})


@pytest.mark.anyio
async def test_output_uses_the_aliases_the_output_schema_advertises() -> None:
    from pydantic import Field

    class Booking(BaseModel):
        booking_id: str = Field(alias="bookingId")

    registry = Registry()
    registered = registry.register(
        make("book", lambda args: Booking(bookingId=args.text), output_schema=Booking)
    )
    assert list(registered.entry["outputSchema"]["properties"]) == ["bookingId"]
    assert await registry.dispatch("book", {"text": "b1"}, ctx()) == Completed(
        output={"bookingId": "b1"}
    )


# -- unknown names ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_near_miss_gets_did_you_mean() -> None:
    registry = Registry()
    registry.register_all([make("echo"), make("search_trips")])
    outcome = failure(await registry.dispatch("ecoh", {"text": "x"}, ctx()))
    assert outcome.code is ErrorCode.NOT_FOUND
    assert outcome.meta == {"candidates": ["echo"], "didYouMean": "echo"}
    assert 'Did you mean "echo"?' in outcome.message
    assert "search_trips" not in outcome.message


@pytest.mark.anyio
async def test_equally_near_names_are_candidates_without_did_you_mean() -> None:
    registry = Registry()
    registry.register_all([make("cat"), make("bat")])
    outcome = failure(await registry.prepare_action("xat", {}, ctx()))
    assert outcome.meta == {"candidates": ["bat", "cat"]}


@pytest.mark.anyio
async def test_nothing_close_gets_no_candidates_and_lists_no_names() -> None:
    registry = Registry()
    registry.register_all([make("echo"), make("search_trips"), make("book_trip")])
    outcome = failure(await registry.dispatch("completely_unrelated_zzz", {}, ctx()))
    assert outcome.code is ErrorCode.NOT_FOUND
    assert outcome.meta == {"candidates": []}
    for name in registry.names():
        assert name not in outcome.message
    assert outcome.next_steps


def test_near_matches_are_drawn_only_from_the_visible_names() -> None:
    registry = Registry()
    registry.register_all([make("echo"), make("echo2")])
    outcome = registry.not_found("ecoh", visible=["echo2"])
    assert outcome.meta == {"candidates": []}


# -- handler action policies --------------------------------------------------------------------


def handler_policy(**overrides: Any) -> ActionPolicy:
    return ActionPolicy(target_type="record", **overrides)


def handler_tool(seen: list[object], **policy: Any) -> Tool[Any, Any, Any]:
    def handler(args: RecordIn, ctx: ToolContext) -> EchoOut:
        seen.append(ctx.handler_action_policy)
        return EchoOut(text=args.record_id)

    return write_tool(
        "records.own", handler, action_policy=handler_policy(**policy), enforcement="handler"
    )


@dataclasses.dataclass
class OwnRecords:
    """A registry holding the handler-enforced ``records.own``, and the admissions (its
    ``ctx.handler_action_policy``) its handler saw."""

    registry: Registry
    tool: RegisteredTool
    seen: list[object]

    @classmethod
    def create(cls, **policy: Any) -> OwnRecords:
        seen: list[object] = []
        registry = Registry()
        return cls(registry, registry.register(handler_tool(seen, **policy)), seen)

    def mint(self) -> HandlerActionPolicy:
        return self.registry.mint_handler_policy(self.tool, InvocationControls())

    async def call(self, admission: HandlerActionPolicy | None = None, **fields: Any) -> object:
        """The outcome of ``records.own`` called with ``admission`` (and ``fields`` of the
        context)."""
        context = ctx(handler_action_policy=admission, **fields)
        return await self.registry.dispatch("records.own", {"record_id": "r"}, context)


@pytest.mark.anyio
async def test_a_generic_tool_never_sees_a_handler_action_policy_and_the_caller_ctx_is_kept() -> (
    None
):
    seen: list[object] = []

    def handler(args: EchoIn, ctx: ToolContext) -> EchoOut:
        seen.append(ctx.handler_action_policy)
        return EchoOut(text=args.text)

    registry = Registry()
    registry.register(make("echo", handler))
    owner = registry.register(handler_tool([]))
    stale = registry.mint_handler_policy(owner, InvocationControls())
    caller_ctx = ctx(handler_action_policy=stale)
    assert await registry.dispatch("echo", {"text": "x"}, caller_ctx) == Completed(
        output={"text": "x"}
    )
    assert seen == [None]
    assert caller_ctx.handler_action_policy is stale


@pytest.mark.anyio
async def test_a_handler_enforced_tool_fails_closed_without_an_admission() -> None:
    records = OwnRecords.create()
    outcome = failure(await records.call())
    assert outcome.code is ErrorCode.ACTION_POLICY_REQUIRED
    assert outcome.reason == "admission-absent"
    assert records.seen == []


@pytest.mark.anyio
async def test_a_forged_or_copied_admission_is_refused() -> None:
    records = OwnRecords.create()
    forged = HandlerActionPolicy(
        capability_id=records.tool.capability_id,
        capability_version=records.tool.capability_version,
        canonical_name=records.tool.name,
        action_policy=handler_policy(),
        controls=InvocationControls(),
    )
    minted = records.mint()
    for admission in (forged, copy.copy(minted), dataclasses.replace(minted)):
        outcome = failure(await records.call(admission))
        assert outcome.code is ErrorCode.ACTION_POLICY_REQUIRED
        assert outcome.reason == "admission-not-minted"
    assert records.seen == []


@pytest.mark.anyio
async def test_an_admission_minted_by_another_registry_is_refused() -> None:
    records, other = OwnRecords.create(), OwnRecords.create()
    outcome = failure(await records.call(other.mint()))
    assert outcome.code is ErrorCode.ACTION_POLICY_REQUIRED
    assert records.seen == []


@pytest.mark.anyio
async def test_a_minted_admission_runs_the_handler_once() -> None:
    records = OwnRecords.create()
    admission = records.mint()
    assert await records.call(admission) == Completed(output={"text": "r"})
    assert records.seen == [admission]
    again = failure(await records.call(admission))
    assert again.code is ErrorCode.ACTION_POLICY_REQUIRED
    assert again.reason == "admission-not-minted"
    assert records.seen == [admission]


@pytest.mark.anyio
async def test_an_admission_minted_for_another_tool_is_refused() -> None:
    records = OwnRecords.create()
    elsewhere = records.registry.register(
        write_tool(
            "records.other",
            action_policy=handler_policy(),
            enforcement="handler",
        )
    )
    admission = records.registry.mint_handler_policy(elsewhere, InvocationControls())
    outcome = failure(await records.call(admission))
    assert outcome.code is ErrorCode.ACTION_POLICY_REQUIRED
    assert meta(outcome)["mismatch"] == "capabilityId"
    assert records.seen == []


def test_only_handler_enforced_tools_get_admissions() -> None:
    registry = Registry()
    generic = registry.register(make("echo"))
    with pytest.raises(ConfigurationError, match="not handler-enforced"):
        registry.mint_handler_policy(generic, InvocationControls())


def test_handler_enforcement_needs_an_action_policy() -> None:
    with pytest.raises(ConfigurationError, match='enforcement="handler" needs an action_policy'):
        Registry().register(make("echo", enforcement="handler"))


@pytest.mark.anyio
async def test_allowed_actor_types_are_enforced_before_the_handler() -> None:
    records = OwnRecords.create(allowed_actor_types=("staff",))
    outcome = failure(await records.call(records.mint(), actor="customer"))
    assert outcome.code is ErrorCode.AUTHORIZATION_DENIED
    assert outcome.reason == "actor_not_allowed"
    assert records.seen == []
    assert await records.call(records.mint(), actor="staff") == Completed(output={"text": "r"})
