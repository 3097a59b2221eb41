"""Plain functions as tools: the models from the signature, the docstring, the wrapped result."""

from __future__ import annotations

import enum
import inspect
import json
import math
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field, RootModel
from tests.builders import risk
from typing_extensions import TypedDict

from charter import (
    ActionPolicy,
    Completed,
    ConfigurationError,
    Denied,
    ErrorCode,
    Failed,
    FunctionInput,
    FunctionOutput,
    Principal,
    Registry,
    Tool,
    ToolContext,
    tool,
)
from charter.host import Host
from charter.tool import JSON_SCHEMA_DIALECT, RESULT_FIELD, WRAP_RESULT_KEYWORD

WRITE_RISK = risk("data-write")
READER = Principal(subject="ana", tenant_id="acme", scopes=frozenset({"trips:read"}))
WRITER = Principal(subject="ana", tenant_id="acme", scopes=frozenset({"trips:read", "trips:write"}))


class Trip(BaseModel):
    trip_id: str
    title: str


class Place(BaseModel):
    city: str
    country: str = Field(min_length=2, max_length=2)


class Mode(enum.Enum):
    TRAIN = "train"
    PLANE = "plane"


class Point(TypedDict):
    x: int
    y: int


@dataclass
class Span:
    start: int
    end: int


class Words(RootModel[list[str]]):
    pass


class TripService:
    def __init__(self) -> None:
        self.trips = {"trp_1": Trip(trip_id="trp_1", title="Lisbon")}
        self.renames = 0


@dataclass(kw_only=True)
class TripsContext(ToolContext):
    trips: TripService


def registry_of(*tools: Tool[Any, Any, Any]) -> Registry:
    registry = Registry()
    registry.register_all(tools)
    return registry


async def dispatch(
    tool_: Tool[Any, Any, Any], arguments: object, ctx: ToolContext | None = None
) -> Any:
    return await registry_of(tool_).dispatch(
        tool_.name, arguments, ctx or TripsContext(tenant_id="acme", trips=TripService())
    )


# -- the input model, from the signature -------------------------------------------------------


@tool(tier="read")
def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    return a + b


def test_each_parameter_is_a_field_with_its_type_and_default() -> None:
    assert issubclass(add.input_model, FunctionInput)
    assert add.input_schema == {
        "$schema": JSON_SCHEMA_DIALECT,
        "additionalProperties": False,
        "properties": {
            "a": {"title": "A", "type": "integer"},
            "b": {"default": 2, "title": "B", "type": "integer"},
        },
        "required": ["a"],
        "title": "AddInput",
        "type": "object",
    }
    assert add.description == "Add two integers."


@pytest.mark.anyio
async def test_the_function_receives_its_arguments_and_its_return_value_is_wrapped() -> None:
    assert await dispatch(add, {"a": 1}) == Completed(output={"result": 3})
    assert await dispatch(add, {"a": 1, "b": 5}) == Completed(output={"result": 6})


@tool(tier="read", name="trips.search")
async def search(
    city: Annotated[str, Field(min_length=2, description="Where the trip goes.")],
    mode: Mode,
    when: Literal["past", "upcoming"] = "upcoming",
    near: Place | None = None,
    limit: int = Field(10, ge=1, le=50, description="At most this many."),
) -> list[Trip]:
    """Search trips."""
    return [Trip(trip_id="trp_1", title=f"{city} {mode.value} {when} {near} {limit}")]


def test_annotated_fields_literals_enums_nested_models_and_optionals_keep_their_schemas() -> None:
    schema = search.input_schema
    properties = schema["properties"]
    assert schema["title"] == "TripsSearchInput"
    assert properties["city"] == {
        "description": "Where the trip goes.",
        "minLength": 2,
        "title": "City",
        "type": "string",
    }
    assert properties["mode"] == {"$ref": "#/$defs/Mode"}
    assert schema["$defs"]["Mode"]["enum"] == ["train", "plane"]
    assert properties["when"]["enum"] == ["past", "upcoming"]
    assert properties["near"]["anyOf"] == [{"$ref": "#/$defs/Place"}, {"type": "null"}]
    assert properties["limit"] == {
        "default": 10,
        "description": "At most this many.",
        "maximum": 50,
        "minimum": 1,
        "title": "Limit",
        "type": "integer",
    }
    assert schema["required"] == ["city", "mode"]


@pytest.mark.anyio
async def test_the_function_receives_validated_values_of_the_types_it_declares() -> None:
    outcome = await dispatch(
        search, {"city": "Porto", "mode": "train", "near": {"city": "Braga", "country": "PT"}}
    )
    assert outcome == Completed(
        output={
            "result": [
                {
                    "trip_id": "trp_1",
                    "title": "Porto train upcoming city='Braga' country='PT' 10",
                }
            ]
        }
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"city": "P", "mode": "train"}, ["city"]),
        ({"city": "Porto", "mode": "bus"}, ["mode"]),
        ({"city": "Porto", "mode": "train", "limit": 51}, ["limit"]),
        ({"city": "Porto", "mode": "train", "near": {"city": "B", "country": "PRT"}}, None),
        ({"city": "Porto", "mode": "train", "extra": 1}, ["extra"]),
    ],
)
async def test_input_is_validated_against_the_signature_and_closed_to_unknown_fields(
    arguments: dict[str, Any], where: list[str] | None
) -> None:
    outcome = await dispatch(search, arguments)
    assert isinstance(outcome, Failed) and outcome.code == ErrorCode.INVALID_INPUT
    assert outcome.meta is not None
    issues: Any = outcome.meta["issues"]
    if where is not None:
        assert issues[0]["loc"] == where


@pytest.mark.anyio
@pytest.mark.parametrize("value", [math.nan, math.inf])
async def test_nan_and_infinity_are_refused_as_for_every_tool(value: float) -> None:
    @tool(tier="read")
    def scale(factor: float) -> float:
        """Scale by a factor."""
        return factor * 2

    outcome = await dispatch(scale, {"factor": value})
    assert isinstance(outcome, Failed) and outcome.code == ErrorCode.INVALID_INPUT


def test_the_input_schema_validates_what_the_tool_accepts() -> None:
    jsonschema.Draft202012Validator.check_schema(search.input_schema)
    validator = jsonschema.Draft202012Validator(search.input_schema)
    assert validator.is_valid({"city": "Porto", "mode": "plane"})
    assert not validator.is_valid({"city": "Porto", "mode": "plane", "extra": True})


# -- the context, recognised by its annotation -------------------------------------------------


@tool(tier="read")
def first(ctx: TripsContext, trip_id: str) -> Trip:
    """The context first."""
    return ctx.trips.trips[trip_id]


@tool(tier="read")
def middle(trip_id: str, ctx: TripsContext, upper: bool = False) -> str:
    """The context between two parameters."""
    title = ctx.trips.trips[trip_id].title
    return title.upper() if upper else title


@tool(tier="read")
async def keyword_only(trip_id: str, *, ctx: TripsContext) -> str:
    """The context as a keyword-only parameter."""
    return ctx.trips.trips[trip_id].title


@tool(tier="read")
def positional_only(trip_id: str, ctx: TripsContext, /, suffix: str = "") -> str:
    """Positional-only parameters, the context among them."""
    return ctx.trips.trips[trip_id].title + suffix


@tool(tier="read")
def only_context(ctx: TripsContext) -> list[str]:
    """No input at all, only the context."""
    return sorted(ctx.trips.trips)


@tool(tier="read")
def nothing() -> str:
    """No parameters."""
    return "ok"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool_", "arguments", "output"),
    [
        (first, {"trip_id": "trp_1"}, {"trip_id": "trp_1", "title": "Lisbon"}),
        (middle, {"trip_id": "trp_1", "upper": True}, {"result": "LISBON"}),
        (keyword_only, {"trip_id": "trp_1"}, {"result": "Lisbon"}),
        (positional_only, {"trip_id": "trp_1", "suffix": "!"}, {"result": "Lisbon!"}),
        (only_context, {}, {"result": ["trp_1"]}),
        (nothing, {}, {"result": "ok"}),
    ],
    ids=["first", "middle", "keyword-only", "positional-only", "alone", "no-parameters"],
)
async def test_the_context_is_recognised_by_its_annotation_wherever_it_stands(
    tool_: Tool[Any, Any, Any], arguments: dict[str, Any], output: dict[str, Any]
) -> None:
    assert "ctx" not in tool_.input_schema["properties"]
    assert await dispatch(tool_, arguments) == Completed(output=output)


def test_a_function_without_parameters_takes_an_empty_object() -> None:
    assert nothing.input_schema["properties"] == {}
    assert "required" not in nothing.input_schema


@tool(tier="read")
def shadowing(json: str, schema: int, copy: bool = False) -> str:
    """Parameters named like BaseModel attributes."""
    return f"{json} {schema} {copy}"


@pytest.mark.anyio
async def test_a_parameter_named_like_a_model_attribute_keeps_its_name_on_the_wire() -> None:
    assert sorted(shadowing.input_schema["properties"]) == ["copy", "json", "schema"]
    outcome = await dispatch(shadowing, {"json": "j", "schema": 2, "copy": True})
    assert outcome == Completed(output={"result": "j 2 True"})


@tool(tier="read")
def colliding(model_config: int, model_config_: int, model_version: int = 0) -> int:
    """A shadowing name next to the name its field would have taken."""
    return 100 * model_config + 10 * model_config_ + model_version


@pytest.mark.anyio
async def test_a_renamed_field_never_collides_with_another_parameter() -> None:
    assert sorted(colliding.input_schema["properties"]) == [
        "model_config",
        "model_config_",
        "model_version",
    ]
    arguments = {"model_config": 1, "model_config_": 2, "model_version": 3}
    assert await dispatch(colliding, arguments) == Completed(output={"result": 123})


class Scaler:
    def __init__(self, factor: int) -> None:
        self.factor = factor

    def scale(self, value: int) -> int:
        """Scale a value by the instance's factor."""
        return value * self.factor


@pytest.mark.anyio
async def test_a_bound_method_is_a_plain_function_without_its_self() -> None:
    scale = _define(Scaler(3).scale)
    assert list(scale.input_schema["properties"]) == ["value"]
    assert await dispatch(scale, {"value": 2}) == Completed(output={"result": 6})


# -- definition-time checks ----------------------------------------------------------------------


def _define(func: Callable[..., Any]) -> Tool[Any, Any, Any]:
    decorate: Any = tool(tier="read")
    return decorate(func)  # type: ignore[no-any-return]


def unannotated(a, b: int) -> int:  # type: ignore[no-untyped-def]
    """Unannotated."""
    return int(b)


def variadic(*values: int) -> int:
    """Variadic."""
    return sum(values)


def keywords(**values: int) -> int:
    """Keywords."""
    return sum(values.values())


def private(_city: str) -> str:
    """Private."""
    return _city


def two_contexts(ctx: TripsContext, other: ToolContext) -> str:
    """Two contexts."""
    return ""


def optional_context(city: str, ctx: TripsContext | None = None) -> str:
    """An optional context."""
    return city


def no_return(city: str):  # type: ignore[no-untyped-def]
    """No return annotation."""
    return city


def undocumented(city: str) -> str:
    return city


def only_outcomes(city: str) -> Denied:
    """Always denies."""
    return Denied(reason="no")


class Opaque:
    pass


def opaque(thing: Opaque) -> str:
    """Takes a class pydantic has no schema for."""
    return ""


@pytest.mark.parametrize(
    ("func", "message"),
    [
        (unannotated, "annotate the parameter 'a' with its type"),
        (variadic, r"\*values cannot be part of a tool's input"),
        (keywords, r"\*\*values cannot be part of a tool's input"),
        (private, "names starting with '_' are private"),
        (two_contexts, "'ctx' and 'other' are both annotated as the context"),
        (optional_context, "annotate the context parameter 'ctx' with the context class alone"),
        (no_return, "annotate the return type"),
        (undocumented, "give a docstring or description="),
        (only_outcomes, "names only outcomes"),
        (opaque, "cannot build the input model from the function's annotations"),
    ],
)
def test_a_function_that_cannot_be_a_tool_is_refused_at_definition(
    func: Callable[..., Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _define(func)


# -- descriptions from the docstring --------------------------------------------------------------


def google(city: str, days: int = 3) -> float:
    """Forecast the temperature.

    Note:
        Only European cities.

    Args:
        city: The city to forecast,
            by its English name.
        days: How many days ahead.

    Returns:
        The temperature in Celsius.

    Raises:
        ValueError: never.

    Examples:
        >>> google("Porto")
        21.5
    """
    return 21.5


def numpy(city: str, days: int = 3) -> float:
    """Forecast the temperature.

    Parameters
    ----------
    city : str
        The city to forecast,
        by its English name.
    days : int
        How many days ahead.

    Returns
    -------
    float
        The temperature in Celsius.
    """
    return 21.5


def sphinx(city: str, days: int = 3) -> float:
    """Forecast the temperature.

    :param city: The city to forecast,
        by its English name.
    :param days: How many days ahead.
    :returns: The temperature in Celsius.
    """
    return 21.5


@pytest.mark.parametrize("func", [google, numpy, sphinx], ids=["google", "numpy", "sphinx"])
def test_parameter_descriptions_come_from_the_docstring_in_each_style(
    func: Callable[..., Any],
) -> None:
    defined = _define(func)
    properties = defined.input_schema["properties"]
    assert properties["city"]["description"] == "The city to forecast,\nby its English name."
    assert properties["days"]["description"] == "How many days ahead."
    result = defined.output_schema["properties"][RESULT_FIELD]
    assert result["description"] == "The temperature in Celsius."
    assert defined.description.startswith("Forecast the temperature.")


def test_the_description_is_the_prose_without_the_sections_the_schemas_carry() -> None:
    assert _define(google).description == (
        "Forecast the temperature.\n\nNote: Only European cities."
    )


def test_an_explicit_field_description_and_description_keyword_win_over_the_docstring() -> None:
    def described(
        city: Annotated[str, Field(description="From the annotation.")], days: int = 3
    ) -> float:
        """Forecast.

        Args:
            city: From the docstring.
            days: How many days ahead.
        """
        return 1.0

    decorate: Any = tool(tier="read", description="Given explicitly.")
    defined: Tool[Any, Any, Any] = decorate(described)
    assert defined.description == "Given explicitly."
    properties = defined.input_schema["properties"]
    assert properties["city"]["description"] == "From the annotation."
    assert properties["days"]["description"] == "How many days ahead."


def test_a_docstring_without_sections_is_the_description_and_needs_no_parser() -> None:
    code = (
        "import sys, charter\n"
        "assert 'griffe' not in sys.modules, 'import charter imported griffe'\n"
        "@charter.tool(tier='read')\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add two integers.\n\n    Both must be small.\n    '''\n"
        "    return a + b\n"
        "assert add.description == 'Add two integers.\\n\\nBoth must be small.'\n"
        "assert 'griffe' not in sys.modules, 'a plain docstring imported griffe'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the output: a model as it is, anything else wrapped in {"result": ...} ----------------------


def returns_model() -> Trip:
    """A model."""
    return Trip(trip_id="t", title="T")


def returns_model_or_denied(deny: bool) -> Trip | Denied:
    """A model or a denial."""
    return Denied(reason="no") if deny else Trip(trip_id="t", title="T")


def returns_int_or_denied(deny: bool) -> int | Denied:
    """An integer or a denial."""
    return Denied(reason="no") if deny else 7


def returns_list() -> list[Trip]:
    """A list of models."""
    return [Trip(trip_id="t", title="T")]


def returns_mapping() -> dict[str, Trip]:
    """A mapping of models."""
    return {"t": Trip(trip_id="t", title="T")}


def returns_typed_dict() -> Point:
    """A TypedDict."""
    return Point(x=1, y=2)


def returns_dataclass() -> Span:
    """A dataclass."""
    return Span(start=1, end=2)


def returns_none() -> None:
    """Nothing."""


def returns_optional(empty: bool) -> Trip | None:
    """A model or nothing."""
    return None if empty else Trip(trip_id="t", title="T")


def returns_root_model() -> Words:
    """A root model, which is not an object."""
    return Words(["a", "b"])


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("func", "arguments", "output"),
    [
        (returns_model, {}, {"trip_id": "t", "title": "T"}),
        (returns_model_or_denied, {"deny": False}, {"trip_id": "t", "title": "T"}),
        (returns_int_or_denied, {"deny": False}, {"result": 7}),
        (returns_list, {}, {"result": [{"trip_id": "t", "title": "T"}]}),
        (returns_mapping, {}, {"result": {"t": {"trip_id": "t", "title": "T"}}}),
        (returns_typed_dict, {}, {"result": {"x": 1, "y": 2}}),
        (returns_dataclass, {}, {"result": {"start": 1, "end": 2}}),
        (returns_none, {}, {"result": None}),
        (returns_optional, {"empty": True}, {"result": None}),
        (returns_optional, {"empty": False}, {"result": {"trip_id": "t", "title": "T"}}),
        (returns_root_model, {}, {"result": ["a", "b"]}),
    ],
)
async def test_a_model_is_the_output_and_any_other_value_is_wrapped_in_result(
    func: Callable[..., Any], arguments: dict[str, Any], output: dict[str, Any]
) -> None:
    defined = _define(func)
    wrapped = RESULT_FIELD in output and len(output) == 1
    assert issubclass(defined.output_model, FunctionOutput) is wrapped
    assert (WRAP_RESULT_KEYWORD in defined.output_schema) is wrapped
    outcome = await dispatch(defined, arguments)
    assert outcome == Completed(output=output)
    jsonschema.Draft202012Validator(defined.output_schema).validate(outcome.output)


def test_the_wrapped_output_schema_is_an_object_with_one_required_result() -> None:
    schema = _define(returns_list).output_schema
    assert schema["type"] == "object"
    assert schema["required"] == [RESULT_FIELD]
    assert schema["title"] == "ReturnsListOutput"
    assert schema[WRAP_RESULT_KEYWORD] is True
    assert schema["properties"][RESULT_FIELD]["items"] == {"$ref": "#/$defs/Trip"}


@pytest.mark.anyio
@pytest.mark.parametrize("func", [returns_model_or_denied, returns_int_or_denied])
async def test_an_outcome_the_function_returns_passes_through_unwrapped(
    func: Callable[..., Any],
) -> None:
    assert await dispatch(_define(func), {"deny": True}) == Denied(reason="no")


@pytest.mark.anyio
async def test_a_return_value_that_breaks_the_annotation_is_invalid_output() -> None:
    def lies() -> int:
        """Claims an integer."""
        return "many"  # type: ignore[return-value]

    outcome = await dispatch(_define(lies), {})
    assert isinstance(outcome, Failed) and outcome.code == ErrorCode.INVALID_OUTPUT


@tool(tier="read")
def count_words(args: Trip) -> int:
    """The model form with a plain return: the input is the model, the output wrapped."""
    return len(args.title.split())


@pytest.mark.anyio
async def test_the_model_form_keeps_its_input_and_wraps_a_plain_return() -> None:
    assert count_words.input_model is Trip
    assert issubclass(count_words.output_model, FunctionOutput)
    outcome = await dispatch(count_words, {"trip_id": "t", "title": "Lisbon in May"})
    assert outcome == Completed(output={"result": 3})


# -- the handler ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sync_functions_run_in_a_worker_thread_and_async_ones_in_the_task() -> None:
    @tool(tier="read")
    def where_sync() -> str:
        """Which thread."""
        return threading.current_thread().name

    @tool(tier="read")
    async def where_async() -> str:
        """Which thread."""
        return threading.current_thread().name

    assert not where_sync.is_async and where_async.is_async
    in_thread = await dispatch(where_sync, {})
    in_task = await dispatch(where_async, {})
    assert in_thread.output["result"].startswith("charter-tool")
    assert in_task.output["result"] == threading.current_thread().name


def test_the_handler_takes_input_and_context_and_unwraps_to_the_function() -> None:
    assert list(inspect.signature(add.handler).parameters) == ["args", "ctx"]
    function: Any = inspect.unwrap(add.handler)
    assert function(1, 2) == 3
    assert add.handler.__name__ == "add"


def test_a_model_form_tool_keeps_the_function_as_its_handler() -> None:
    def model_form(args: Trip, ctx: ToolContext) -> Trip:
        """Echo."""
        return args

    handler: object = _define(model_form).handler
    assert handler is model_form


# -- everything else is unchanged: the manifest, the host, the ledger -----------------------------


def test_the_manifest_shows_the_generated_schemas() -> None:
    entry = json.loads(registry_of(add).manifest_json())[0]
    assert entry["inputSchema"] == add.input_schema
    assert entry["outputSchema"]["properties"] == {"result": {"title": "Result", "type": "integer"}}
    assert entry["outputSchema"][WRAP_RESULT_KEYWORD] is True


@tool(
    tier="write",
    risk_policy=WRITE_RISK,
    required_scopes=["trips:write"],
    action_policy=ActionPolicy(target_type="trip", command_target_field="trip_id"),
)
def rename_trip(
    trip_id: str, title: Annotated[str, Field(min_length=1)], ctx: TripsContext
) -> Trip:
    """Rename a trip."""
    ctx.trips.renames += 1
    trip = ctx.trips.trips[trip_id].model_copy(update={"title": title})
    ctx.trips.trips[trip_id] = trip
    return trip


def _host(service: TripService) -> Host:
    def context(principal: Any, registered: Any, controls: Any) -> TripsContext:
        return TripsContext(trips=service)

    return Host(registry_of(rename_trip, search), context_factory=context)


@pytest.mark.anyio
async def test_scopes_the_ledger_and_targets_work_for_a_plain_function_tool() -> None:
    service = TripService()
    host = _host(service)
    arguments = {"trip_id": "trp_1", "title": "Porto"}

    denied = await host.invoke("rename_trip", arguments, READER)
    assert isinstance(denied, Failed) and denied.code == ErrorCode.AUTHORIZATION_DENIED

    missing = await host.invoke("rename_trip", arguments, WRITER)
    assert isinstance(missing, Failed) and missing.meta == {"reason": "request_id_required"}

    request = {"requestId": str(uuid.uuid4())}
    done = await host.invoke("rename_trip", {**arguments, "_charter": request}, WRITER)
    assert done == Completed(output={"trip_id": "trp_1", "title": "Porto"})
    again = await host.invoke("rename_trip", {**arguments, "_charter": request}, WRITER)
    assert isinstance(again, Completed) and again.replayed and service.renames == 1

    other = {"trip_id": "trp_1", "title": "Braga", "_charter": request}
    conflict = await host.invoke("rename_trip", other, WRITER)
    assert isinstance(conflict, Failed) and conflict.code == ErrorCode.IDEMPOTENCY_CONFLICT

    entry = next(e for e in host.discover(WRITER) if e["name"] == "rename_trip")
    assert entry["actionPolicy"]["targetResolution"] == "command-target-field"
    assert entry["controls"]["required"] == ["requestId"]


@pytest.mark.anyio
async def test_over_mcp_the_wrapped_result_is_structured_content_valid_for_its_schema() -> None:
    pytest.importorskip("mcp")
    from mcp.client import Client

    from charter.mcp import create_server

    server = create_server(_host(TripService()), principal=READER)
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        schema = listed["trips.search"].output_schema
        assert schema is not None and schema[WRAP_RESULT_KEYWORD] is True
        result = await client.call_tool("trips.search", {"city": "Porto", "mode": "plane"})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["result"][0]["trip_id"] == "trp_1"
    jsonschema.Draft202012Validator(schema).validate(result.structured_content)


# -- charter diff sees a signature change as the contract change it is -----------------------------


def _find_v1(city: str) -> list[Trip]:
    """Find trips."""
    return []


def _find_required_country(city: str, country: str) -> list[Trip]:
    """Find trips."""
    return []


def _find_optional_country(city: str, country: str = "PT") -> list[Trip]:
    """Find trips."""
    return []


def _find_renamed_parameter(town: str) -> list[Trip]:
    """Find trips."""
    return []


def _find_narrower_parameter(city: Literal["Porto", "Lisbon"]) -> list[Trip]:
    """Find trips."""
    return []


def _find_optional_result(city: str) -> list[Trip] | None:
    """Find trips."""
    return []


def _find_one(city: str) -> Trip:
    """Find trips."""
    return Trip(trip_id="t", title="T")


def _find_documented(city: str) -> list[Trip]:
    """Find trips.

    Args:
        city: Where the trips go.
    """
    return []


def _manifest(func: Callable[..., Any]) -> list[dict[str, Any]]:
    decorate: Any = tool(tier="read", name="trips.find")
    entries: list[dict[str, Any]] = json.loads(registry_of(decorate(func)).manifest_json())
    return entries


@pytest.mark.parametrize(
    ("new", "kind", "path", "severity"),
    [
        (_find_required_country, "required-property-added", "inputSchema.country", "breaking"),
        (_find_optional_country, "property-added", "inputSchema.country", "compatible"),
        (_find_renamed_parameter, "property-removed", "inputSchema.city", "breaking"),
        (_find_narrower_parameter, None, "inputSchema.city", "breaking"),
        (_find_optional_result, "union-member-added", "outputSchema.result", "breaking"),
        (_find_one, "property-removed", "outputSchema.result", "breaking"),
        (_find_documented, "description-changed", "inputSchema.city", "compatible"),
    ],
)
def test_charter_diff_judges_a_signature_change_as_a_contract_change(
    new: Callable[..., Any], kind: str | None, path: str, severity: str
) -> None:
    from charter.evolution import diff_manifests

    diff = diff_manifests(_manifest(_find_v1), _manifest(new))
    changes = [c for t in diff.tools for c in t.changes if c.path == path]
    assert changes, [(c.kind, c.path) for t in diff.tools for c in t.changes]
    assert any(c.severity == severity and kind in (None, c.kind) for c in changes), changes
    same = diff_manifests(_manifest(_find_v1), _manifest(_find_v1))
    assert [t.status for t in same.tools] == ["unchanged"]
