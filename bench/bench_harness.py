"""The harness's per-tool-call overhead against pydantic-ai's and the OpenAI Agents SDK's.

Two views, as in frameworks.md §9: one tool call through each framework's tool
machinery (no model), and a whole agent turn whose scripted model makes ``K`` calls in
one step and then answers (each framework's own offline test model). A framework that
is not installed is skipped.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from typing import Any

from bench import Case, Sides
from bench._add import add_registry
from charter import Principal
from charter.audit import MemoryAuditSink
from charter.harness import Harness, MemorySessionStore, ModelRequest, ModelResponse, ToolCall
from charter.harness.definitions import bind_tools, bound_names
from charter.harness.dispatch import HostPreparer, absorb, execute_prepared, request_id_for
from charter.harness.seal import PlannedCall, seal_calls
from charter.harness.store import CallRecord
from charter.harness.testing import FunctionModel
from charter.host import Host

K = 5
"""Tool calls per model step in the loop cases."""

ARGS = {"a": 1, "b": 2}
ARGS_JSON = json.dumps(ARGS)
PRINCIPAL = Principal(subject="user-1", tenant_id="t", scopes=frozenset({"math:read"}))


async def aadd(a: int, b: int) -> int:
    """Add two ints."""
    return a + b


def _host() -> Host:
    registry = add_registry("aadd", required_scopes=["math:read"])
    return Host(registry, audit=MemoryAuditSink(capacity=1000))


def _charter_call(host: Host) -> Any:
    """One model tool call as a turn runs it: seal (prepared once on the host), execute, map."""
    tools = bind_tools(host.registry, host.callable_tools(PRINCIPAL), (), None)
    names = bound_names(tools)  # a turn computes them once, not per call
    raw = [ToolCall(call_id="x", name="aadd", arguments=ARGS_JSON)]
    counter = iter(range(1 << 62))

    async def one() -> object:
        preparer = HostPreparer(
            host, principal=PRINCIPAL, session_id="ses", turn_id="t", step_id="s", audience=None
        )
        (planned,) = await seal_calls(
            raw,
            tools=tools,
            registry=host.registry,
            limits=host.limits,
            principal=PRINCIPAL,
            new_id=lambda: f"inv_{next(counter)}",
            preparer=preparer,
            names=names,
        )
        assert isinstance(planned, PlannedCall) and planned.sealed is not None
        record = CallRecord(
            call=planned.call,
            tool_name=planned.sealed.tool_name,
            args=planned.sealed.args,
            invocation_id=planned.invocation_id,
            request_id=request_id_for("ses", planned.invocation_id or ""),
            status="pending",
        )
        kept = preparer.take(record.invocation_id)
        assert kept is not None
        outcome = await execute_prepared(host, record, kept[0])
        return absorb(record, outcome).result

    return one


def _charter_turn(host: Host) -> Any:
    def step(request: ModelRequest) -> ModelResponse:
        if request.messages[-1].role == "user":
            return ModelResponse(
                tool_calls=[
                    ToolCall(call_id=f"c{i}", name="aadd", arguments=ARGS_JSON) for i in range(K)
                ]
            )
        return ModelResponse(text="done")

    harness = Harness(host, FunctionModel(step), store=MemorySessionStore())

    async def turn() -> object:
        return await harness.session(PRINCIPAL).run("go")

    return turn


def _pydantic_ai() -> tuple[Any, Any] | None:
    try:
        from pydantic_ai import Agent, RunContext
        from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart
        from pydantic_ai.messages import ModelResponse as PaiResponse
        from pydantic_ai.models.function import AgentInfo
        from pydantic_ai.models.function import FunctionModel as PaiFunctionModel
        from pydantic_ai.models.test import TestModel
        from pydantic_ai.tool_manager import ToolManager
        from pydantic_ai.tools import Tool
        from pydantic_ai.toolsets import FunctionToolset
        from pydantic_ai.usage import RunUsage
    except ImportError:
        return None
    state: dict[str, Any] = {}

    async def one() -> object:
        manager = state.get("tm")
        if manager is None:
            ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
            manager = state["tm"] = await ToolManager(FunctionToolset([Tool(aadd)])).for_run_step(
                ctx
            )
        return await manager.handle_call(ToolCallPart("aadd", ARGS_JSON, tool_call_id="x"))

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PaiResponse:
        if len(messages) == 1:
            return PaiResponse(
                parts=[ToolCallPart("aadd", ARGS_JSON, tool_call_id=f"c{i}") for i in range(K)]
            )
        return PaiResponse(parts=[TextPart("done")])

    agent = Agent(PaiFunctionModel(respond), tools=[aadd])

    async def turn() -> object:
        return await agent.run("go")

    return one, turn


def _openai_agents() -> tuple[Any, Any] | None:
    try:
        from agents import Agent, Runner, function_tool
        from agents.testing import ScriptedModel, assistant_message, function_call
        from agents.tool_context import ToolContext
    except ImportError:
        return None
    tool = function_tool(aadd)

    async def one() -> object:
        ctx = ToolContext(
            context=None, tool_name="aadd", tool_call_id="x", tool_arguments=ARGS_JSON
        )
        return await tool.on_invoke_tool(ctx, ARGS_JSON)

    async def turn() -> object:
        steps = [
            [function_call("aadd", ARGS, call_id=f"c{i}") for i in range(K)],
            [assistant_message("done")],
        ]
        agent = Agent(name="a", model=ScriptedModel(steps), tools=[tool])
        return await Runner.run(agent, "go")

    return one, turn


def cases() -> list[Case]:
    """The harness against pydantic-ai and the OpenAI Agents SDK, per call and per turn."""
    host = _host()
    charter_one = _charter_call(host)
    charter_turn = _charter_turn(host)

    async def check() -> None:
        result = await charter_one()
        if getattr(result, "output", None) != {"total": 3}:
            raise AssertionError(f"the charter call did not complete: {result!r}")
        turn = await charter_turn()
        if getattr(turn, "status", None) != "completed" or len(turn.results) != K:
            raise AssertionError(f"the charter turn did not complete: {turn!r}")

    found: list[Case] = []
    for framework, builder in (("pydantic-ai", _pydantic_ai), ("openai-agents", _openai_agents)):
        built = builder()
        if built is None:
            continue
        one, turn = built
        direct = (
            "`ToolManager.handle_call`"
            if framework == "pydantic-ai"
            else "`FunctionTool.on_invoke_tool`"
        )
        found += [
            Sides(charter_one, one, check).case(
                "harness: one model tool call (seal + Host.invoke + result)",
                f"{framework}: {direct}, async tool",
                target=8.0,
                note=(
                    f"one `add(a, b)` call from the model: the harness seals it (JSON parse "
                    f"under payload limits, then `Host.prepare`: scopes and the one input "
                    f"validation), runs the prepared call with `Host.execute` (audit event, "
                    f"output validation) and maps the outcome to a tool result, against "
                    f"{framework}'s own per-call machinery for the same async "
                    f"function, which validates input and calls it (no scopes, no audit, no "
                    f"output validation)."
                ),
            ),
            Sides(charter_turn, turn, check).case(
                f"harness turn: scripted model, {K} tool calls in one step",
                f"{framework}: agent run, same script",
                target=1.0,
                note=(
                    f"a whole turn: a scripted model asks for {K} `add` calls at once, they run "
                    f"concurrently, then it answers; the harness also writes the session record "
                    f"(in-memory store) at the end; with no observer it builds no events. The "
                    f"baseline is {framework}'s agent loop with its offline test model and "
                    f"tracing off."
                ),
            ),
        ]
    return found
