"""The pydantic-ai toolset, driven by pydantic-ai's own FunctionModel (no network)."""

from __future__ import annotations

import importlib.util
import json
from typing import TYPE_CHECKING, Any

import pytest
from harness_support import ALICE, BOB, AddIn, AddOut, World

from charter import Interaction, InteractionRequired, ToolContext

if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

# pydantic-ai is imported by the tests, not at collection: importing it costs every
# pytest-xdist worker over half a second of CPU (find_spec does not import it).
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(importlib.util.find_spec("pydantic_ai") is None, reason="no pydantic_ai"),
]


def scripted(*calls: tuple[str, dict[str, Any], str]) -> FunctionModel:
    """A model that makes ``calls`` (name, args, id) in its first step, then says done."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1 and calls:
            return ModelResponse(
                parts=[
                    ToolCallPart(name, json.dumps(args), tool_call_id=cid)
                    for name, args, cid in calls
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    from pydantic_ai.messages import ToolReturnPart

    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def agent(world: World, model: FunctionModel, session_id: str = "s1") -> Agent[None, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.tools import DeferredToolRequests

    from charter.integrations.pydantic_ai import CharterToolset

    return Agent(
        model,
        toolsets=[CharterToolset(world.host, ALICE, session_id=session_id)],
        output_type=[str, DeferredToolRequests],
    )


async def test_a_tool_call_runs_through_the_host(world: World) -> None:
    result = await agent(world, scripted(("add", {"a": 2, "b": 3}, "c1"))).run("add")

    assert result.output == "done"
    (ret,) = returns(result.all_messages())
    assert ret.content == {"sum": 5}
    assert [e.tool for e in await world.ledger.events()] == ["add"]


async def test_invalid_output_reaches_the_model_as_a_failure_not_as_data(world: World) -> None:
    # Catches a toolset that returns the handler's value unchecked (pydantic-ai's default).
    result = await agent(world, scripted(("bad_total", {}, "c1"))).run("go")

    text = json.dumps([p.model_response_str() for p in returns(result.all_messages())])
    assert "INVALID_OUTPUT" in text
    assert "not-an-int" not in text


async def test_invalid_arguments_are_retried_before_anyone_is_asked_to_approve(
    world: World,
) -> None:
    result = await agent(world, scripted(("cancel_booking", {"booking_id": 7}, "c1"))).run("go")

    assert result.output == "done"
    assert await world.host.approvals.list(BOB) == []
    assert world.executions == []


async def test_the_model_cannot_send_invocation_controls_to_confirm_its_own_call(
    world: World,
) -> None:
    # Catches a toolset that hands the model's arguments to the host as they are: the
    # host read "_charter" as the caller's controls, so "confirmed": true skipped the
    # user's confirmation, and "onBehalfOf" or "reasonCode" were the model's to choose.
    sent = ({"confirmed": True}, {"onBehalfOf": "t2"}, {"reasonCode": "routine"})
    model = scripted(
        *(
            ("cancel_booking", {"booking_id": "b1", "_charter": controls}, f"c{n}")
            for n, controls in enumerate(sent)
        )
    )
    result = await agent(world, model).run("cancel b1")

    assert result.output == "done"
    texts = [str(p.content) for p in returns(result.all_messages())]
    assert len(texts) == 3
    for text in texts:
        assert text.startswith("[INVALID_INPUT] _charter: This field is reserved for the host")
    assert await world.host.approvals.list(BOB) == []
    assert world.executions == []


async def test_an_approval_resumed_twice_runs_the_tool_once(world: World) -> None:
    # Catches what frameworks.md §1 measured: replaying the persisted history with the
    # same DeferredToolResults ran the approved tool a second time.
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

    ag = agent(world, scripted(("cancel_booking", {"booking_id": "b1"}, "c1")))
    first = await ag.run("cancel b1")
    assert isinstance(first.output, DeferredToolRequests)
    (confirm,) = first.output.approvals
    assert confirm.tool_name == "cancel_booking"
    assert first.output.metadata["c1"]["gate"] == "confirmation"
    history = ModelMessagesTypeAdapter.dump_json(first.all_messages())

    approved = DeferredToolResults(approvals={"c1": True})
    second = await ag.run(
        message_history=ModelMessagesTypeAdapter.validate_json(history),
        deferred_tool_results=approved,
    )
    assert isinstance(second.output, DeferredToolRequests)
    approval_id = second.output.metadata["c1"]["approvalId"]
    assert world.executions == []
    await world.host.approvals.grant(approval_id, BOB)
    history = ModelMessagesTypeAdapter.dump_json(second.all_messages())

    outputs = []
    for _ in range(2):  # a retried request, or two approvers clicking at once
        run = await ag.run(
            message_history=ModelMessagesTypeAdapter.validate_json(history),
            deferred_tool_results=approved,
        )
        outputs.append(run.output)
        assert returns(run.new_messages())[0].content == {"cancelled": "b1"}

    assert outputs == ["done", "done"]
    assert world.count("cancel_booking") == 1


async def test_the_handlers_own_approval_reaches_it_when_the_app_approves_without_metadata(
    world: World,
) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

    from charter import Host, Registry, define_tool
    from charter.integrations.pydantic_ai import CharterToolset

    # Catches a toolset that continued only the host's gates: approving the standard way,
    # DeferredToolResults(approvals={"c1": True}), called the tool afresh, the handler
    # never saw the approval and asked again on every approval.
    answers: list[bool | None] = []

    async def pay(args: AddIn, ctx: ToolContext) -> AddOut | InteractionRequired:
        answers.append(ctx.resume.approved if ctx.resume is not None else None)
        if ctx.resume is not None and ctx.resume.approved:
            return AddOut(sum=args.a + args.b)
        prompt = f"Pay {args.a + args.b}?"
        return InteractionRequired(
            interaction=Interaction(id="pay-1", kind="approval", prompt=prompt)
        )

    registry = Registry()
    registry.register(
        define_tool(
            name="pay",
            description="Pay.",
            input_schema=AddIn,
            output_schema=AddOut,
            handler=pay,
            tier="read",
        )
    )
    ag = Agent(
        scripted(("pay", {"a": 2, "b": 3}, "c1")),
        toolsets=[CharterToolset(Host(registry), ALICE, session_id="s1")],
        output_type=[str, DeferredToolRequests],
    )
    first = await ag.run("pay")
    assert isinstance(first.output, DeferredToolRequests)
    assert first.output.metadata["c1"]["gate"] == "handler"

    second = await ag.run(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c1": True}),
    )
    assert second.output == "done"
    (ret,) = returns(second.new_messages())
    assert ret.content == {"sum": 5}
    # Without the metadata the toolset finds the pause as the call answers now (the
    # handler asks once more), then continues that one with the approval.
    assert answers == [None, None, True]


async def test_a_denied_call_is_a_terminal_failure_the_model_sees(world: World) -> None:
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

    ag = agent(world, scripted(("cancel_booking", {"booking_id": "b1"}, "c1")))
    first = await ag.run("cancel b1")
    assert isinstance(first.output, DeferredToolRequests)
    history = first.all_messages()
    second = await ag.run(
        message_history=history, deferred_tool_results=DeferredToolResults(approvals={"c1": True})
    )
    assert isinstance(second.output, DeferredToolRequests)
    await world.host.approvals.deny(second.output.metadata["c1"]["approvalId"], BOB)

    third = await ag.run(
        message_history=second.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c1": True}),
    )
    (ret,) = [p for p in returns(third.new_messages())]
    assert "Denied" in ret.model_response_str()
    assert world.executions == []


async def test_a_deferred_tool_becomes_an_external_call_with_its_invocation_id(
    world: World,
) -> None:
    from pydantic_ai.tools import DeferredToolRequests

    result = await agent(world, scripted(("start_job", {"job": "export"}, "c1"))).run("go")

    assert isinstance(result.output, DeferredToolRequests)
    (call,) = result.output.calls
    assert call.tool_name == "start_job"
    assert result.output.metadata["c1"]["job"] == "export"


async def test_a_deferred_calls_result_is_validated_and_settles_the_hosts_record(
    world: World,
) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

    from charter.integrations.pydantic_ai import CharterToolset

    # Catches a result handed back as pydantic-ai has it, DeferredToolResults(calls=...):
    # pydantic-ai never calls the toolset again, so the model read output that broke the
    # tool's schema and the host's deferred record stayed active.
    toolset = CharterToolset(world.host, ALICE, session_id="s1")
    ag = Agent(
        scripted(("start_job", {"job": "export"}, "c1")),
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
    )
    first = await ag.run("go")
    assert isinstance(first.output, DeferredToolRequests)
    (call,) = first.output.calls
    ((_, invocation, _),) = world.executions

    refused = await toolset.settle(call, {"state": "done"})
    assert isinstance(refused, ToolFailed) and "[INVALID_OUTPUT]" in refused.message
    record = await world.ledger.get_deferred(str(invocation))
    assert record is not None and record.status == "active"

    value = await toolset.settle(call, {"status": "exported"})
    assert value == {"status": "exported"}
    record = await world.ledger.get_deferred(str(invocation))
    assert record is not None and record.status == "settled"
    twice = await toolset.settle(call, {"status": "other"})
    assert isinstance(twice, ToolFailed) and "[IDEMPOTENCY_CONFLICT]" in twice.message

    second = await ag.run(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(calls={call.tool_call_id: value}),
    )
    assert second.output == "done"
    (ret,) = returns(second.new_messages())
    assert ret.content == {"status": "exported"}
