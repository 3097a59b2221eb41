"""LangChain tools and a LangGraph agent, driven by LangChain's fake chat model (no network)."""

from __future__ import annotations

import importlib.util
import itertools
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from harness_support import ALICE, BOB, World
from tests.builders import fake_tool_model

if TYPE_CHECKING:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage

# LangChain is imported by the tests, not at collection: importing it costs every
# pytest-xdist worker nearly a second of CPU (find_spec does not import it).
pytestmark = [
    pytest.mark.anyio,
    *(
        pytest.mark.skipif(importlib.util.find_spec(name) is None, reason=f"no {name}")
        for name in ("langchain_core", "langgraph", "langchain")  # create_agent: `langchain`
    ),
]


def model(*calls: tuple[str, dict[str, Any], str]) -> GenericFakeChatModel:
    from langchain_core.messages import AIMessage

    first = AIMessage(
        content="", tool_calls=[{"name": n, "args": a, "id": cid} for n, a, cid in calls]
    )
    messages: Iterator[AIMessage] = itertools.chain([first], itertools.repeat(AIMessage("done")))
    return fake_tool_model()(messages=messages)


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    from langchain_core.messages import ToolMessage

    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


async def test_a_tool_call_returns_a_tool_message_with_the_validated_output(world: World) -> None:
    from langchain_core.messages import ToolMessage

    from charter.integrations.langchain import charter_tools

    (add,) = charter_tools(world.host, ALICE, session_id="s1", tools=["add"])
    message = await add.ainvoke(
        {"type": "tool_call", "name": "add", "args": {"a": 1, "b": 2}, "id": "c1"}
    )

    assert isinstance(message, ToolMessage)
    assert (message.tool_call_id, message.status) == ("c1", "success")
    assert json.loads(str(message.content)) == {"sum": 3}
    assert add.tool_call_schema["properties"].keys() == {"a", "b"}  # type: ignore[index]


def test_an_agent_runs_tools_through_the_host_synchronously(world: World) -> None:
    from langchain.agents import create_agent

    from charter.integrations.langchain import charter_tools

    agent = create_agent(
        model(("add", {"a": 2, "b": 2}, "c1")),
        tools=charter_tools(world.host, ALICE, session_id="s1"),
    )
    state = agent.invoke({"messages": [{"role": "user", "content": "add"}]})

    (message,) = tool_messages(state)
    assert json.loads(str(message.content)) == {"sum": 4}
    assert state["messages"][-1].content == "done"


async def test_invalid_output_and_invalid_arguments_are_error_messages_not_crashes(
    world: World,
) -> None:
    from langchain.agents import create_agent

    from charter.integrations.langchain import charter_tools

    agent = create_agent(
        model(("bad_total", {}, "c1"), ("add", {"a": "x"}, "c2")),
        tools=charter_tools(world.host, ALICE, session_id="s1"),
    )
    state = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})

    bad, invalid = tool_messages(state)
    assert bad.status == "error" and "INVALID_OUTPUT" in str(bad.content)
    assert "not-an-int" not in str(bad.content)
    assert invalid.status == "error" and "INVALID_INPUT" in str(invalid.content)


async def test_an_approval_interrupts_the_graph_and_a_forked_resume_runs_the_tool_once(
    world: World,
) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from charter.integrations.langchain import charter_tools

    # Catches a tool whose resume re-executes: LangGraph re-runs the node on resume and
    # on a time-travel fork from the interrupted checkpoint (frameworks.md §5.4).
    agent = create_agent(
        model(("cancel_booking", {"booking_id": "b1"}, "c1")),
        tools=charter_tools(world.host, ALICE, session_id="thread-1"),
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "thread-1"}}
    first = await agent.ainvoke({"messages": [{"role": "user", "content": "cancel b1"}]}, config)
    (confirm,) = first["__interrupt__"]
    assert confirm.value["gate"] == "confirmation"

    second = await agent.ainvoke(Command(resume=True), config)
    (approval,) = second["__interrupt__"]
    assert approval.value["gate"] == "approval"
    assert approval.value["approvalId"] == approval.value["interactionId"]
    assert world.executions == []
    fork_point = (await agent.aget_state(config)).config
    await world.host.approvals.grant(approval.value["interactionId"], BOB)

    done = await agent.ainvoke(Command(resume=True), config)
    (message,) = tool_messages(done)
    assert json.loads(str(message.content)) == {"cancelled": "b1"}

    forked = await agent.ainvoke(Command(resume=True), fork_point)
    (again,) = tool_messages(forked)
    assert json.loads(str(again.content)) == {"cancelled": "b1"}
    assert world.count("cancel_booking") == 1


async def test_a_rejected_approval_is_an_error_message_and_nothing_runs(world: World) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from charter.integrations.langchain import charter_tools

    agent = create_agent(
        model(("cancel_booking", {"booking_id": "b1"}, "c1")),
        tools=charter_tools(world.host, ALICE, session_id="thread-2"),
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "thread-2"}}
    await agent.ainvoke({"messages": [{"role": "user", "content": "cancel b1"}]}, config)
    done = await agent.ainvoke(Command(resume={"approved": False}), config)

    (message,) = tool_messages(done)
    assert message.status == "error" and "declined" in str(message.content)
    assert world.executions == []


async def test_outside_a_graph_an_interaction_comes_back_as_an_error_naming_it(
    world: World,
) -> None:
    from langchain_core.messages import ToolMessage

    from charter.integrations.langchain import charter_tools

    (tool,) = charter_tools(world.host, ALICE, session_id="s1", tools=["ask_user"])
    message = await tool.ainvoke(
        {"type": "tool_call", "name": "ask_user", "args": {"question": "?"}, "id": "c1"}
    )
    assert isinstance(message, ToolMessage) and message.status == "error"
    assert '"interactionId": "ask-1"' in str(message.content)


async def test_the_model_cannot_send_invocation_controls_to_confirm_its_own_call(
    world: World,
) -> None:
    from charter.integrations.langchain import charter_tools

    # Catches a bridge that hands the model's arguments to the host as they are: the host
    # read "_charter" as the caller's controls, so "confirmed": true skipped the user's
    # confirmation, and "onBehalfOf" or "reasonCode" were the model's to choose.
    (cancel,) = charter_tools(world.host, ALICE, session_id="s1", tools=["cancel_booking"])
    sent = ({"confirmed": True}, {"onBehalfOf": "t2"}, {"reasonCode": "routine"})
    for n, controls in enumerate(sent):
        message = await cancel.ainvoke(
            {
                "type": "tool_call",
                "name": "cancel_booking",
                "args": {"booking_id": "b1", "_charter": controls},
                "id": f"c{n}",
            }
        )
        assert message.status == "error"
        assert str(message.content).startswith(
            "[INVALID_INPUT] _charter: This field is reserved for the host"
        )
    assert await world.host.approvals.list(BOB) == []
    assert world.executions == []


async def test_two_tenants_threads_with_the_same_tool_call_id_settle_their_own_deferred_calls(
    world: World,
) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from charter import Completed, ErrorCode, Principal
    from charter.integrations.langchain import charter_tools

    # Catches deferred records keyed by the tool call id alone ("lc_call_0"): the second
    # thread's deferral overwrote the first's, resuming the first settled the second's
    # call, and the second thread was handed the first tenant's output.
    other = Principal(subject="alice", tenant_id="t2", scopes=ALICE.scopes)
    config: Any = {"configurable": {"thread_id": "thread-1"}}
    agents = [
        create_agent(
            model(("start_job", {"job": f"export-{who.tenant_id}"}, "call_0")),
            tools=charter_tools(world.host, who, session_id="thread-1", tools=["start_job"]),
            checkpointer=InMemorySaver(),
        )
        for who in (ALICE, other)
    ]
    for a in agents:
        paused = await a.ainvoke({"messages": [{"role": "user", "content": "go"}]}, config)
        assert paused["__interrupt__"][0].value["charter"] == "deferred"
    mine, theirs = (str(invocation) for _, invocation, _ in world.executions)
    assert mine != theirs

    refused = await world.host.settle(mine, Completed(output={"status": "x"}), tenant="t2")
    assert not refused and refused.refused is not None
    assert refused.refused.code is ErrorCode.NOT_FOUND

    for agent, status in zip(agents, ("done-t1", "done-t2"), strict=True):
        done = await agent.ainvoke(Command(resume={"status": status}), config)
        (message,) = tool_messages(done)
        assert json.loads(str(message.content)) == {"status": status}
    records = [await world.ledger.get_deferred(i) for i in (mine, theirs)]
    assert [(r.tenant_id, r.status) for r in records if r is not None] == [
        ("t1", "settled"),
        ("t2", "settled"),
    ]
    assert [json.loads(r.outcome or "")["output"] for r in records if r is not None] == [
        {"status": "done-t1"},
        {"status": "done-t2"},
    ]
