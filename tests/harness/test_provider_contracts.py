"""Contract tests: the official SDKs send charter's tools as the providers document them.

Each test builds real requests with a real client library (``openai``, ``anthropic``,
pydantic-ai's OpenAI model, LangChain's ``ChatOpenAI``) over an ``httpx.MockTransport``,
captures the wire JSON, checks every tool name against the provider's documented pattern
and every parameters schema against the provider's documented subset, then answers with
a provider response calling each tool by its model-facing name and checks the right tool
ran exactly once. No network.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness_support import recording_tool
from pydantic import BaseModel

from charter import Principal, RegisteredTool, Registry
from charter.harness import (
    Harness,
    ModelRequest,
    ModelResponse,
    ToolSchema,
    model_name_for,
    model_names,
)
from charter.host import Host
from charter.providers import (
    AnthropicModel,
    OpenAIChatModel,
    anthropic_tools,
    gemini_tool_calls,
    gemini_tools,
    openai_messages,
    openai_tool_calls,
    openai_tools,
)
from charter.store import SqlStore, sqlite_url

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.travel import DEMO_PRINCIPALS, build_host  # noqa: E402
from examples.travel.app import build_registry  # noqa: E402

pytestmark = pytest.mark.anyio

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""OpenAI function names (Chat Completions and Responses)."""
ANTHROPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Anthropic Messages tool names."""
GEMINI_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
"""Gemini function declaration names."""

# -- the documented schema subsets ------------------------------------------------------

_STRICT_REFUSED = set(
    "default minLength maxLength oneOf not if then else patternProperties"
    " unevaluatedProperties unevaluatedItems propertyNames minProperties maxProperties"
    " dependentRequired dependentSchemas contains uniqueItems discriminator".split()
)
_STRICT_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6"}
_GEMINI_KEYS = set(
    "type format description nullable enum properties required items minItems maxItems"
    " minimum maximum minLength maxLength pattern anyOf propertyOrdering title".split()
)
_GEMINI_TYPES = {"string", "number", "integer", "boolean", "array", "object"}


def nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every subschema of ``schema`` (properties, items, variants, definitions)."""
    if not isinstance(schema, dict):
        return
    yield schema
    for key in ("properties", "$defs", "definitions"):
        for child in (schema.get(key) or {}).values():
            yield from nodes(child)
    yield from nodes(schema.get("items"))
    for key in ("anyOf", "allOf", "oneOf"):
        for child in schema.get(key) or ():
            yield from nodes(child)


def check_openai_strict(schema: dict[str, Any]) -> None:
    """OpenAI strict mode: closed objects, every property required, no refused keyword."""
    assert schema.get("type") == "object" and "anyOf" not in schema
    for node in nodes(schema):
        assert not (_STRICT_REFUSED & set(node)), (_STRICT_REFUSED & set(node), node)
        if node.get("type") == "object" or "properties" in node:
            assert node.get("additionalProperties") is False, node
            assert sorted(node.get("required", [])) == sorted(node.get("properties", {})), node
        if "$ref" in node:
            assert set(node) == {"$ref"}, node
        if "format" in node:
            assert node["format"] in _STRICT_FORMATS | {"uuid"}, node


def check_anthropic(schema: dict[str, Any]) -> None:
    """Anthropic ``input_schema``: a JSON Schema object (``type: object`` at the root)."""
    assert schema.get("type") == "object"
    assert "$schema" not in schema


def check_gemini(schema: dict[str, Any]) -> None:
    """Gemini ``parameters``: the OpenAPI 3.0 subset, one type name per node, no ``$ref``."""
    for node in nodes(schema):
        assert set(node) <= _GEMINI_KEYS, set(node) - _GEMINI_KEYS
        if "type" in node:
            assert node["type"] in _GEMINI_TYPES, node
        if "enum" in node:  # Schema.enum is list[str]
            assert all(isinstance(value, str) for value in node["enum"]), node


# -- tools --------------------------------------------------------------------------------


class QueryIn(BaseModel):
    text: str
    limit: int = 5
    note: str | None = None


LONG = "travel." + "itineraries." * 8 + "search"


def strict_calls(registry: Registry) -> list[tuple[str, dict[str, Any]]]:
    """One call of each tool by its model-facing name, as a strict-mode model sends it."""
    names = model_names(registry.tools())
    return [
        (names.model_name(t.name), {"text": "x", "limit": None, "note": None})
        for t in registry.tools()
    ]


def pathological(runs: list[str]) -> Registry:
    """Dotted, over-long and overridden names, each tool recording its runs."""

    def tool(name: str, **options: Any) -> Any:
        return recording_tool(name, runs, QueryIn, **options)

    registry = Registry()
    registry.register(tool("trips.search", aliases=["trips.find"]))
    registry.register(tool(LONG))
    registry.register(tool("7zip.extract"))
    # Would collide with trips.search after mapping; the author's override separates them.
    registry.register(tool("trips_search", model_name="trips_search_legacy"))
    return registry


ADA = Principal(subject="ada", tenant_id="acme", scopes=frozenset())


def agent_principal() -> Principal:
    spec = next(s for s in DEMO_PRINCIPALS if s["role"] == "traveller-agent")
    return Principal(
        subject=spec["subject"],
        tenant_id=spec["tenant_id"],
        scopes=frozenset(spec["scopes"]),
        kind=spec["kind"],
    )


@asynccontextmanager
async def travel_host(tmp_path: Path) -> AsyncIterator[Host]:
    """The travel example's host on a fresh SQLite file."""
    async with SqlStore(sqlite_url(tmp_path / "travel.db")) as store:
        host = await build_host(store)
        try:
            yield host
        finally:
            host.registry.close()


TRAVEL_READS: dict[str, dict[str, Any]] = {
    "trips.search": {"text": "Lisbon", "limit": None},
    "trips.get": {"trip_id": "trp_missing"},
    "memory.recall": {"key": None},
}
"""Travel read tools and arguments a strict-mode model would send (nulls for left-out)."""


def test_the_travel_tools_are_named_and_shaped_as_every_provider_documents() -> None:
    tools = build_registry().tools()
    for api in ("chat", "responses"):
        for entry in openai_tools(tools, api=api):
            function = entry["function"] if api == "chat" else entry
            assert OPENAI_NAME.fullmatch(function["name"])
            check_openai_strict(function["parameters"])
    for entry in anthropic_tools(tools):
        assert ANTHROPIC_NAME.fullmatch(entry["name"])
        check_anthropic(entry["input_schema"])
    for declaration in gemini_tools(tools)[0]["functionDeclarations"]:
        assert GEMINI_NAME.fullmatch(declaration["name"])
        check_gemini(declaration["parameters"])
    names = {e["name"] for e in anthropic_tools(tools)}
    assert {"trips_search", "trips_rename_v2", "bookings_refund"} <= names
    assert "trips_find" not in names  # an alias is not a second tool


def test_pathological_names_are_all_valid_and_distinct_on_every_provider() -> None:
    tools = pathological([]).tools()
    hand_built = ToolSchema(
        name="réserver.vol", description="Book.", parameters={"type": "object", "properties": {}}
    )
    every: list[RegisteredTool | ToolSchema] = [*tools, hand_built]
    chat = [e["function"]["name"] for e in openai_tools(every)]
    anthropic = [e["name"] for e in anthropic_tools(every)]
    gemini = [d["name"] for d in gemini_tools(every)[0]["functionDeclarations"]]
    assert chat == anthropic == gemini
    assert len(set(chat)) == len(chat) == 5
    assert chat[:4] == [
        "trips_search",
        model_name_for(LONG),
        "_7zip_extract",
        "trips_search_legacy",
    ]
    assert chat[4] == "reserver_vol"
    for name in chat:
        assert OPENAI_NAME.fullmatch(name) and GEMINI_NAME.fullmatch(name)


# -- OpenAI Chat Completions, through the official client -----------------------------


class Wire:
    """A mock provider: records each request's JSON and answers from a script."""

    def __init__(self, answers: list[Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
        self.answers = answers
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.requests.append(body)
        answer = self.answers.pop(0) if self.answers else self.answers_done
        return self.http.Response(200, json=answer(body))

    http: Any = httpx

    answers_done: Callable[[dict[str, Any]], dict[str, Any]] = staticmethod(
        lambda body: _chat_text("done")
    )

    def client(self, http: Any = httpx) -> Any:
        """An async HTTP client of ``http`` (``httpx``, or the ``httpx2`` newer SDKs use)."""
        self.http = http
        return http.AsyncClient(transport=http.MockTransport(self))


def _chat_completion(completion_id: str, finish: str, message: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions body with one choice: ``message``, finished for ``finish``."""
    choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [choice],
    }


def _chat_text(text: str) -> dict[str, Any]:
    return _chat_completion("chatcmpl-2", "stop", {"content": text})


def _chat_calls(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    tool_calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for i, (name, args) in enumerate(calls)
    ]
    return _chat_completion("chatcmpl-1", "tool_calls", {"content": None, "tool_calls": tool_calls})


def _wire_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] if "function" in t else t["name"] for t in body["tools"]]


async def test_openai_chat_completions_calls_each_travel_tool_once_by_its_model_name(
    tmp_path: Path,
) -> None:
    openai = pytest.importorskip("openai")
    async with travel_host(tmp_path) as host:
        calls = [(model_name_for(name), args) for name, args in TRAVEL_READS.items()]
        wire = Wire([lambda body: _chat_calls(calls), lambda body: _chat_text("done")])
        client = openai.AsyncOpenAI(api_key="test", http_client=wire.client())
        harness = Harness(host, OpenAIChatModel(client, model="gpt-test"))
        result = await harness.session(agent_principal()).run("Find my Lisbon trips")
        assert result.status == "completed"
        first = wire.requests[0]
        for tool in first["tools"]:
            function = tool["function"]
            assert OPENAI_NAME.fullmatch(function["name"])
            if function["name"] == "request_action_approval":
                # Its "arguments" is a free-form mapping, which strict mode would narrow
                # to {}: the tool goes out as it is, not strict.
                assert function["strict"] is False
                arguments = function["parameters"]["properties"]["arguments"]
                assert arguments["additionalProperties"] is True
                continue
            assert function["strict"] is True
            check_openai_strict(function["parameters"])
        assert "request_action_approval" in _wire_names(first)
        # The results went back paired with the model's call ids, in its order.
        second = wire.requests[1]["messages"]
        assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == [
            "call_0",
            "call_1",
            "call_2",
        ]
        assert [(r.tool_name, r.model_name) for r in result.results] == [
            (name, model_name_for(name)) for name in TRAVEL_READS
        ]
        events = await host.audit.events(tenant="acme", limit=50)
        ran = sorted((e.tool, e.model_name) for e in events if e.action == "call")
        assert ran == sorted((name, model_name_for(name)) for name in TRAVEL_READS)


async def test_openai_chat_completions_runs_each_pathological_tool_exactly_once() -> None:
    openai = pytest.importorskip("openai")
    runs: list[str] = []
    registry = pathological(runs)
    calls = strict_calls(registry)
    wire = Wire([lambda body: _chat_calls(calls)])
    client = openai.AsyncOpenAI(api_key="test", http_client=wire.client())
    result = (
        await Harness(Host(registry), OpenAIChatModel(client, model="gpt-test"))
        .session(ADA)
        .run("go")
    )
    assert result.status == "completed"
    assert [r.kind for r in result.results] == ["completed"] * 4
    assert sorted(runs) == sorted(t.name for t in registry.tools())
    assert _wire_names(wire.requests[0]) == [c[0] for c in calls]


# -- OpenAI Responses, through the official client --------------------------------------


class ResponsesModel:
    """A harness ``Model`` over ``client.responses.create`` (the formats' Responses shapes)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def step(self, request: ModelRequest) -> ModelResponse:
        response = await self.client.responses.create(
            model="gpt-test",
            input=openai_messages(request.messages, api="responses"),
            tools=openai_tools(request.tools, api="responses"),
        )
        calls = openai_tool_calls(response, tools=request.tools)
        return ModelResponse(text=None if calls else "done", tool_calls=calls)


def _responses_calls(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-test",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [
            {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": f"call_{i}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for i, (name, args) in enumerate(calls)
        ],
    }


def _responses_text() -> dict[str, Any]:
    body = _responses_calls([])
    body["output"] = [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        }
    ]
    return body


async def test_openai_responses_runs_each_pathological_tool_exactly_once() -> None:
    openai = pytest.importorskip("openai")
    runs: list[str] = []
    registry = pathological(runs)
    calls = strict_calls(registry)
    wire = Wire([lambda body: _responses_calls(calls), lambda body: _responses_text()])
    client = openai.AsyncOpenAI(api_key="test", http_client=wire.client())
    result = await Harness(Host(registry), ResponsesModel(client)).session(ADA).run("go")
    assert result.status == "completed"
    assert sorted(runs) == sorted(t.name for t in registry.tools())
    for tool in wire.requests[0]["tools"]:
        assert OPENAI_NAME.fullmatch(tool["name"])
        check_openai_strict(tool["parameters"])
    outputs = [i for i in wire.requests[1]["input"] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == [f"call_{i}" for i in range(4)]


# -- Anthropic Messages, through the official client ------------------------------------


def _anthropic_http() -> Any:
    """The HTTP library the installed ``anthropic`` client takes (``httpx2`` since 2.15)."""
    try:
        import httpx2
    except ImportError:
        return httpx
    return httpx2


def _anthropic_calls(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [
            {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
            for i, (name, args) in enumerate(calls)
        ],
    }


def _anthropic_text() -> dict[str, Any]:
    body = _anthropic_calls([])
    body["stop_reason"] = "end_turn"
    body["content"] = [{"type": "text", "text": "done"}]
    return body


async def test_anthropic_messages_calls_each_tool_once_by_its_model_name(tmp_path: Path) -> None:
    anthropic = pytest.importorskip("anthropic")
    http = _anthropic_http()
    runs: list[str] = []
    registry = pathological(runs)
    names = model_names(registry.tools())
    calls = [(names.model_name(t.name), {"text": "x"}) for t in registry.tools()]
    wire = Wire([lambda body: _anthropic_calls(calls), lambda body: _anthropic_text()])
    client = anthropic.AsyncAnthropic(api_key="test", http_client=wire.client(http))
    result = (
        await Harness(Host(registry), AnthropicModel(client, model="claude-test"))
        .session(ADA)
        .run("go")
    )
    assert result.status == "completed"
    assert sorted(runs) == sorted(t.name for t in registry.tools())
    for tool in wire.requests[0]["tools"]:
        assert ANTHROPIC_NAME.fullmatch(tool["name"])
        check_anthropic(tool["input_schema"])
    # The transcript replays the model's own names in its tool_use blocks.
    replayed = wire.requests[1]["messages"][1]["content"]
    assert [b["name"] for b in replayed] == [c[0] for c in calls]
    # The travel tools on the same client.
    async with travel_host(tmp_path) as host:
        calls = [
            (model_name_for(n), {k: v for k, v in a.items() if v}) for n, a in TRAVEL_READS.items()
        ]
        wire = Wire([lambda body: _anthropic_calls(calls), lambda body: _anthropic_text()])
        client = anthropic.AsyncAnthropic(api_key="test", http_client=wire.client(http))
        harness = Harness(host, AnthropicModel(client, model="claude-test"))
        result = await harness.session(agent_principal()).run("Find my trips")
        assert [r.tool_name for r in result.results] == list(TRAVEL_READS)
        for tool in wire.requests[0]["tools"]:
            assert ANTHROPIC_NAME.fullmatch(tool["name"])
            check_anthropic(tool["input_schema"])


# -- Gemini: no official client installed; the REST shapes ------------------------------


async def test_gemini_function_calls_by_model_name_run_each_tool_once() -> None:
    runs: list[str] = []
    registry = pathological(runs)
    names = model_names(registry.tools())
    sent: list[list[dict[str, Any]]] = []

    class GeminiShapes:
        async def step(self, request: ModelRequest) -> ModelResponse:
            sent.append(gemini_tools(request.tools))
            if len(sent) > 1:
                return ModelResponse(text="done")
            response = {
                "candidates": [
                    {
                        "content": {
                            "role": "model",
                            "parts": [
                                {
                                    "functionCall": {
                                        "name": names.model_name(t.name),
                                        "args": {"text": "x"},
                                    }
                                }
                                for t in registry.tools()
                            ],
                        }
                    }
                ]
            }
            return ModelResponse(tool_calls=gemini_tool_calls(response))

    result = await Harness(Host(registry), GeminiShapes()).session(ADA).run("go")
    assert result.status == "completed"
    assert sorted(runs) == sorted(t.name for t in registry.tools())
    for declaration in sent[0][0]["functionDeclarations"]:
        assert GEMINI_NAME.fullmatch(declaration["name"])
        check_gemini(declaration["parameters"])


# -- pydantic-ai's OpenAI model and LangChain's ChatOpenAI ------------------------------


async def test_pydantic_ai_openai_model_calls_each_tool_once_by_its_model_name() -> None:
    pytest.importorskip("pydantic_ai")
    openai = pytest.importorskip("openai")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel as PydanticOpenAI
    from pydantic_ai.providers.openai import OpenAIProvider

    from charter.integrations.pydantic_ai import CharterToolset

    runs: list[str] = []
    registry = pathological(runs)
    names = model_names(registry.tools())
    calls = [(names.model_name(t.name), {"text": "x"}) for t in registry.tools()]
    wire = Wire([lambda body: _chat_calls(calls), lambda body: _chat_text("done")])
    client = openai.AsyncOpenAI(api_key="test", http_client=wire.client())
    model = PydanticOpenAI("gpt-4.1", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, toolsets=[CharterToolset(Host(registry), ADA, session_id="s1")])
    result = await agent.run("go")
    assert result.output == "done"
    assert sorted(runs) == sorted(t.name for t in registry.tools())
    for tool in wire.requests[0]["tools"]:
        assert OPENAI_NAME.fullmatch(tool["function"]["name"])
    assert sorted(_wire_names(wire.requests[0])) == sorted(c[0] for c in calls)


async def test_langchain_chat_openai_binds_model_names_and_each_tool_runs_once() -> None:
    pytest.importorskip("langchain_openai")
    from langchain_openai import ChatOpenAI

    from charter.integrations.langchain import charter_tools

    runs: list[str] = []
    registry = pathological(runs)
    host = Host(registry)
    tools = charter_tools(host, ADA, session_id="s1")
    names = model_names(registry.tools())
    calls = [(names.model_name(t.name), {"text": "x"}) for t in registry.tools()]
    wire = Wire([lambda body: _chat_calls(calls)])
    chat = ChatOpenAI(model="gpt-4.1", api_key="test", http_async_client=wire.client())
    message = await chat.bind_tools(tools).ainvoke("go")
    for tool in wire.requests[0]["tools"]:
        assert OPENAI_NAME.fullmatch(tool["function"]["name"])
    assert sorted(_wire_names(wire.requests[0])) == sorted(c[0] for c in calls)
    by_name = {t.name: t for t in tools}
    for call in message.tool_calls:
        await by_name[call["name"]].ainvoke(call)
    assert sorted(runs) == sorted(t.name for t in registry.tools())
    events = await host.audit.events(tenant="acme")
    assert sorted((e.tool, e.model_name) for e in events) == sorted(names.by_tool.items())
