"""Ports of documented example tools to ``@tool``, with their bodies unchanged (docs/migrating.md).

From the MCP Python SDK's ``MCPServer`` (its README and ``examples/snippets/servers``:
``mcpserver_quickstart.py``, ``basic_tool.py``, ``structured_output.py``,
``tool_progress.py``) and from pydantic-ai's function tools (``docs/tools.md``). Only the
decorator, and where a tool takes a context its annotation, change; each body is the
example's. Each test checks what the example documents: the result, the schema.
"""

from __future__ import annotations

import random
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict, TypeVar

from charter import Completed, Registry, Tool, ToolContext, tool

DOCS = Path(__file__).resolve().parent.parent / "docs"
DepsT = TypeVar("DepsT")


async def call(tool_: Tool[Any, Any, Any], arguments: dict[str, Any], ctx: ToolContext) -> Any:
    registry = Registry()
    registry.register(tool_)
    outcome = await registry.dispatch(tool_.name, arguments, ctx)
    assert isinstance(outcome, Completed), outcome
    return outcome.output


# -- MCPServer -------------------------------------------------------------------------------------


@tool(tier="read")
def add(a: int, b: int) -> int:
    """Add two numbers"""
    return a + b


@tool(tier="read", description="Get weather for a city")
def get_weather(city: str, unit: str = "celsius") -> str:
    """Get weather for a city."""
    # This would normally call a weather API
    return f"Weather in {city}: 22°{unit[0].upper()}"


class WeatherData(BaseModel):
    """Weather information structure."""

    temperature: float = Field(description="Temperature in Celsius")
    humidity: float = Field(description="Humidity percentage")
    condition: str
    wind_speed: float


@tool(tier="read", name="get_weather_data")
def get_weather_data(city: str) -> WeatherData:
    """Get weather for a city - returns structured data."""
    # Simulated weather data
    return WeatherData(
        temperature=22.5,
        humidity=45.0,
        condition="sunny",
        wind_speed=5.2,
    )


# typing_extensions.TypedDict: pydantic reads typing.TypedDict only from Python 3.12.
class LocationInfo(TypedDict):
    latitude: float
    longitude: float
    name: str


@tool(tier="read")
def get_location(address: str) -> LocationInfo:
    """Get location coordinates"""
    return LocationInfo(latitude=51.5074, longitude=-0.1278, name="London, UK")


@tool(tier="read")
def get_statistics(data_type: str) -> dict[str, float]:
    """Get various statistics"""
    return {"mean": 42.5, "median": 40.0, "std_dev": 5.2}


@tool(tier="read")
def list_cities() -> list[str]:
    """Get a list of cities"""
    return ["London", "Paris", "Tokyo"]
    # Returns: {"result": ["London", "Paris", "Tokyo"]}


@tool(tier="read")
def get_temperature(city: str) -> float:
    """Get temperature as a simple float"""
    return 22.5
    # Returns: {"result": 22.5}


@dataclass(kw_only=True)
class McpStyleContext(ToolContext):
    """A context with the MCP ``Context``'s log shorthands, so ported bodies keep them."""

    async def info(self, message: str) -> None:
        await self.log("info", message)

    async def debug(self, message: str) -> None:
        await self.log("debug", message)


@tool(tier="read", description="Demonstrates progress reporting")
async def long_running_task(task_name: str, ctx: McpStyleContext, steps: int = 5) -> str:
    """Execute a task with progress updates."""
    await ctx.info(f"Starting: {task_name}")

    for i in range(steps):
        progress = (i + 1) / steps
        await ctx.report_progress(
            progress=progress,
            total=1.0,
            message=f"Step {i + 1}/{steps}",
        )
        await ctx.debug(f"Completed step {i + 1}")

    return f"Task '{task_name}' completed"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool_", "arguments", "output"),
    [
        (add, {"a": 1, "b": 2}, {"result": 3}),
        (get_weather, {"city": "Paris"}, {"result": "Weather in Paris: 22°C"}),
        (get_weather, {"city": "Oslo", "unit": "fahrenheit"}, {"result": "Weather in Oslo: 22°F"}),
        (
            get_weather_data,
            {"city": "London"},
            {"temperature": 22.5, "humidity": 45.0, "condition": "sunny", "wind_speed": 5.2},
        ),
        (
            get_location,
            {"address": "London"},
            {"result": {"latitude": 51.5074, "longitude": -0.1278, "name": "London, UK"}},
        ),
        (
            get_statistics,
            {"data_type": "sales"},
            {"result": {"mean": 42.5, "median": 40.0, "std_dev": 5.2}},
        ),
        (list_cities, {}, {"result": ["London", "Paris", "Tokyo"]}),
        (get_temperature, {"city": "Paris"}, {"result": 22.5}),
    ],
)
async def test_mcpserver_examples_run_unchanged_as_charter_tools(
    tool_: Tool[Any, Any, Any], arguments: dict[str, Any], output: dict[str, Any]
) -> None:
    assert await call(tool_, arguments, ToolContext()) == output


def test_mcpserver_examples_keep_their_descriptions_and_parameter_schemas() -> None:
    assert add.description == "Add two numbers"
    assert get_weather.description == "Get weather for a city"  # description= wins
    assert get_weather.input_schema["required"] == ["city"]
    assert get_weather.input_schema["properties"]["unit"]["default"] == "celsius"
    data = get_weather_data.output_schema["properties"]
    assert data["temperature"]["description"] == "Temperature in Celsius"


@dataclass
class Recorder:
    """What a transport would have shown the caller."""

    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_log(self, level: str, message: str, data: Any) -> None:
        self.logs.append((level, message))


@pytest.mark.anyio
async def test_a_ported_tool_with_a_context_in_the_middle_reports_progress_and_logs() -> None:
    assert sorted(long_running_task.input_schema["properties"]) == ["steps", "task_name"]
    seen = Recorder()
    ctx = McpStyleContext(progress_sink=seen.on_progress, log_sink=seen.on_log)
    output = await call(long_running_task, {"task_name": "sync", "steps": 2}, ctx)
    assert output == {"result": "Task 'sync' completed"}
    assert seen.progress == [(0.5, 1.0, "Step 1/2"), (1.0, 1.0, "Step 2/2")]
    assert seen.logs == [
        ("info", "Starting: sync"),
        ("debug", "Completed step 1"),
        ("debug", "Completed step 2"),
    ]


# -- pydantic-ai -----------------------------------------------------------------------------------


@dataclass(kw_only=True)
class DepsContext(ToolContext, Generic[DepsT]):
    """A context whose ``deps`` are what pydantic-ai's ``RunContext.deps`` were."""

    deps: DepsT


@tool(tier="read")
def roll_dice() -> str:
    """Roll a six-sided die and return the result."""
    return str(random.randint(1, 6))


@tool(tier="read")
def get_player_name(ctx: DepsContext[str]) -> str:
    """Get the player's name."""
    return ctx.deps


@tool(tier="read")
def foobar(a: int, b: str, c: dict[str, list[float]]) -> str:
    """Get me foobar.

    Args:
        a: apple pie
        b: banana cake
        c: carrot smoothie
    """
    return f"{a} {b} {c}"


class Foobar(BaseModel):
    """This is a Foobar"""

    x: int
    y: str
    z: float = 3.14


@tool(tier="read", name="foobar_model")
def foobar_model(f: Foobar) -> str:
    """Format a Foobar."""
    return str(f)


@tool(tier="read")
def hitchhiker(ctx: DepsContext[int], answer: str) -> str:
    """Answer with the dependency."""
    return f"{ctx.deps} {answer}"


@pytest.mark.anyio
async def test_pydantic_ai_function_tools_run_unchanged_with_deps_on_the_context() -> None:
    rolled = await call(roll_dice, {}, ToolContext())
    assert rolled["result"] in {"1", "2", "3", "4", "5", "6"}
    assert await call(get_player_name, {}, DepsContext(deps="Anne")) == {"result": "Anne"}
    assert await call(hitchhiker, {"answer": "a"}, DepsContext(deps=42)) == {"result": "42 a"}
    output = await call(foobar, {"a": 1, "b": "x", "c": {"k": [1.5]}}, ToolContext())
    assert output == {"result": "1 x {'k': [1.5]}"}


def test_the_google_docstring_describes_the_parameters_as_pydantic_ai_documents() -> None:
    schema = foobar.input_schema
    assert foobar.description == "Get me foobar."
    assert {name: p["description"] for name, p in schema["properties"].items()} == {
        "a": "apple pie",
        "b": "banana cake",
        "c": "carrot smoothie",
    }
    assert schema["properties"]["c"]["additionalProperties"] == {
        "items": {"type": "number"},
        "type": "array",
    }
    assert schema["required"] == ["a", "b", "c"]
    assert schema["additionalProperties"] is False


@pytest.mark.anyio
async def test_a_single_model_parameter_is_the_input_as_in_pydantic_ai() -> None:
    schema = foobar_model.input_schema
    assert schema["title"] == "Foobar"
    assert schema["required"] == ["x", "y"]
    assert schema["properties"]["z"]["default"] == 3.14
    output = await call(foobar_model, {"x": 0, "y": "a"}, ToolContext())
    assert output == {"result": "x=0 y='a' z=3.14"}


# -- the page itself -------------------------------------------------------------------------------

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_code_in_the_migration_guide_runs_as_written() -> None:
    blocks = PYTHON_BLOCK.findall((DOCS / "migrating.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 3
    module = types.ModuleType("docs_migrating")
    sys.modules[module.__name__] = module
    try:
        for number, block in enumerate(blocks, start=1):
            exec(
                compile(block, f"docs/migrating.md python block {number}", "exec"), module.__dict__
            )
    finally:
        del sys.modules[module.__name__]
