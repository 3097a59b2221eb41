"""Model-facing tool names: derived, overridden, refused on collision, mapped back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from harness_support import QueryOut, recording_tool
from pydantic import BaseModel, model_validator
from tests.builders import tiered_tool

from charter import ConfigurationError, Principal, Registry
from charter.evolution import diff_manifests
from charter.harness import (
    MODEL_NAME_PATTERN,
    Harness,
    ModelResponse,
    ToolCall,
    ToolSchema,
    model_name_for,
    model_names,
)
from charter.harness.testing import ScriptedModel
from charter.host import Host
from charter.providers import anthropic_tools, gemini_tool_result, gemini_tools, openai_tools

pytestmark = pytest.mark.anyio

ADA = Principal(subject="ada", tenant_id="acme", scopes=frozenset({"trips:read"}))
LONG = "travel." + "itineraries." * 8 + "search"


class QueryIn(BaseModel):
    text: str


def counted(name: str, runs: list[str], **options: Any) -> Any:
    """A read tool called ``name`` that records each run in ``runs``."""
    return recording_tool(name, runs, QueryIn, **options)


@pytest.mark.parametrize(
    ("canonical", "expected"),
    [
        ("trips.search", "trips_search"),
        ("add", "add"),
        ("trips.rename.v2", "trips_rename_v2"),
        ("catalog-ping", "catalog-ping"),
        ("7zip.extract", "_7zip_extract"),
        ("-x", "_-x"),
        ("réserver.vol", "reserver_vol"),
        ("旅行", "tool"),
    ],
)
def test_a_canonical_name_maps_to_a_readable_provider_safe_name(
    canonical: str, expected: str
) -> None:
    assert model_name_for(canonical) == expected
    assert MODEL_NAME_PATTERN.fullmatch(expected)


def test_a_name_over_64_characters_is_cut_with_a_stable_hash_of_the_whole_name() -> None:
    first = model_name_for(LONG)
    other = model_name_for(LONG.replace("search", "lookup"))
    assert len(first) == 64 and MODEL_NAME_PATTERN.fullmatch(first)
    assert first.startswith("travel_itineraries_")
    assert first == model_name_for(LONG)  # deterministic, across processes too (SHA-256)
    assert first != other and first[:55] == other[:55]


def test_an_author_sets_the_model_facing_name_and_the_manifest_shows_it() -> None:
    registry = Registry()
    registry.register(counted("trips.search", [], model_name="find_trips"))
    (entry,) = registry.manifest()
    assert entry["name"] == "trips.search" and entry["modelName"] == "find_trips"
    assert [t["function"]["name"] for t in openai_tools(registry.tools())] == ["find_trips"]


def test_the_manifest_has_no_model_name_unless_the_author_set_one() -> None:
    registry = Registry()
    registry.register(counted("trips.search", []))
    assert "modelName" not in registry.manifest()[0]


@pytest.mark.parametrize("bad", ["trips.search", "9lives", "", "a" * 65, "réserver"])
def test_a_model_name_model_apis_would_refuse_fails_at_definition(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="model_name"):
        counted("trips.search", [], model_name=bad)


def test_a_non_ascii_canonical_name_is_refused_by_charter_itself() -> None:
    with pytest.raises(ConfigurationError, match="tool name or alias"):
        counted("réserver", [])


def test_charter_diff_reports_a_changed_model_name_as_compatible() -> None:
    old, new = Registry(), Registry()
    old.register(counted("trips.search", []))
    new.register(counted("trips.search", [], model_name="find_trips"))
    report = diff_manifests(old.manifest(), new.manifest())
    kinds = {(c.kind, c.severity) for tool in report.tools for c in tool.changes}
    assert kinds == {("model-name-changed", "compatible")}
    assert not report.unversioned_breaking()


def colliding_registry() -> Registry:
    registry = Registry()
    registry.register(counted("trips.search", []))
    registry.register(counted("trips_search", []))
    return registry


def test_two_tools_that_map_to_one_name_fail_every_export_naming_both() -> None:
    registry = colliding_registry()
    host = Host(registry)
    exports: list[Callable[[], object]] = [
        lambda: openai_tools(registry.tools()),
        lambda: openai_tools(registry.tools(), api="responses"),
        lambda: anthropic_tools(registry.tools()),
        lambda: gemini_tools(registry.tools()),
        lambda: Harness(host, ScriptedModel([])),
    ]
    for export in exports:
        with pytest.raises(ConfigurationError) as raised:
            export()
        message = str(raised.value)
        assert "'trips.search'" in message and "'trips_search'" in message
        assert "model_name=" in message


def test_a_model_name_override_resolves_a_collision() -> None:
    registry = Registry()
    registry.register(counted("trips.search", []))
    registry.register(counted("trips_search", [], model_name="trips_search_legacy"))
    names = model_names(registry.tools())
    assert names.by_tool == {
        "trips.search": "trips_search",
        "trips_search": "trips_search_legacy",
    }
    assert names.tool_name("trips_search") == "trips.search"


def test_an_override_colliding_with_a_derived_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"'trips\.search' and 'find'"):
        model_names([counted("trips.search", [], model_name="find"), counted("find", [])])


def test_an_alias_is_never_offered_as_a_second_tool() -> None:
    registry = Registry()
    registry.register(counted("trips.search", [], aliases=["trips.find", "find_trips"]))
    for tools in (openai_tools(registry.tools()), anthropic_tools(registry.tools())):
        assert len(tools) == 1
    assert len(gemini_tools(registry.tools())[0]["functionDeclarations"]) == 1


def test_a_hand_built_schema_is_named_for_models_too() -> None:
    schema = ToolSchema(name="trips.search", description="d", parameters={"type": "object"})
    (tool,) = anthropic_tools([schema])
    assert tool["name"] == "trips_search"


async def test_a_model_calls_the_mapped_name_and_the_canonical_tool_runs_once() -> None:
    runs: list[str] = []
    registry = Registry()
    registry.register(counted("trips.search", runs))
    registry.register(counted(LONG, runs))
    host = Host(registry)
    long_name = model_name_for(LONG)
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ToolCall(call_id="c1", name="trips_search", arguments={"text": "Rome"}),
                    ToolCall(call_id="c2", name=long_name, arguments={"text": "Oslo"}),
                ]
            ),
            ModelResponse(text="found"),
        ]
    )
    session = Harness(host, model).session(ADA)
    result = await session.run("find trips")
    assert result.status == "completed"
    assert runs == ["trips.search", LONG]
    assert [(r.tool_name, r.model_name) for r in result.results] == [
        ("trips.search", "trips_search"),
        (LONG, long_name),
    ]
    # The model was offered the model-facing names, the canonical ones kept beside them.
    offered = model.requests[0].tools
    assert [(t.name, t.tool_name) for t in offered] == [
        ("trips_search", "trips.search"),
        (long_name, LONG),
    ]
    # The audit keeps both names.
    events = sorted(await host.audit.events(tenant="acme"), key=lambda e: e.tool)
    assert [(e.tool, e.model_name) for e in events] == sorted(
        [("trips.search", "trips_search"), (LONG, long_name)]
    )


async def test_an_unknown_name_lists_the_model_facing_names() -> None:
    registry = Registry()
    registry.register(counted("trips.search", []))
    model = ScriptedModel(
        [ModelResponse(tool_calls=[ToolCall(call_id="c1", name="trips.serch", arguments={})])]
    )
    result = await Harness(Host(registry), model).session(ADA).run("go")
    (failed,) = result.results
    assert failed.code == "tool.unknown"
    assert "Available tools: trips_search." in (failed.message or "")


def test_a_gemini_function_response_carries_the_name_the_model_called() -> None:
    from charter.harness import ToolResult

    result = ToolResult(
        kind="completed",
        call_id="c1",
        tool_name="trips.search",
        model_name="trips_search",
        output={"trips": []},
    )
    assert gemini_tool_result(result)["functionResponse"]["name"] == "trips_search"


class CountedIn(BaseModel):
    text: str

    @model_validator(mode="after")
    def _count(self) -> CountedIn:
        VALIDATIONS.append(self.text)
        return self


VALIDATIONS: list[str] = []


async def test_a_model_call_is_validated_once_from_sealing_to_its_handler() -> None:
    def handler(args: CountedIn) -> QueryOut:
        return QueryOut(tool=args.text)

    registry = Registry()
    registry.register(
        tiered_tool("trips.search", "read", handler, CountedIn, QueryOut, description="Search.")
    )
    host = Host(registry)
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ToolCall(call_id="c1", name="trips_search", arguments='{"text": "Rome"}'),
                    ToolCall(call_id="c2", name="trips_search", arguments='{"text": 7}'),
                ]
            )
        ]
    )
    VALIDATIONS.clear()
    result = await Harness(host, model).session(ADA).run("go")
    assert VALIDATIONS == ["Rome"]  # sealing prepared it on the host; that call ran
    ok, bad = result.results
    assert ok.kind == "completed" and ok.output == {"tool": "Rome"}
    assert bad.code == "tool.invalid-arguments" and bad.details is not None
    assert bad.details["issues"] == [
        {"path": ["text"], "code": "string_type", "message": "Input should be a valid string"}
    ]
    # The refused call is audited by the host like any call it refused.
    events = await host.audit.events(tenant="acme")
    assert sorted((e.outcome, e.code) for e in events) == [
        ("completed", None),
        ("failed", "INVALID_INPUT"),
    ]
