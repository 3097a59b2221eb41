from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Iterator
from dataclasses import FrozenInstanceError
from typing import Any

import jsonschema
import pytest
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    computed_field,
    field_validator,
)
from tests.builders import WRITE_RISK, risk

from charter import (
    ActionPolicy,
    ConfigurationError,
    CreatedTarget,
    Denied,
    ErrorCode,
    Registry,
    RiskTier,
    Tool,
    ToolContext,
    define_tool,
    tool,
)
from charter.risk import READ_ONLY_RISK
from charter.tool import JSON_SCHEMA_DIALECT
from charter.tool._closed_models import CLOSED_MODEL_ATTRIBUTE, closed_model


class EchoIn(BaseModel):
    text: str


class EchoOut(BaseModel):
    text: str


class Address(BaseModel):
    city: str
    lines: list[str] = []


class Person(BaseModel):
    """A person with a nested address."""

    name: str
    home: Address
    previous: list[Address] = []


class OpenIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    text: str


class Measure(BaseModel):
    value: float


class Reading(BaseModel):
    measure: Measure


def echo_handler(args: EchoIn, ctx: ToolContext) -> EchoOut:
    return EchoOut(text=args.text)


def define(**overrides: Any) -> Tool[Any, Any, Any]:
    """define_tool with a valid read tool's arguments, overridden by ``overrides``."""
    arguments: dict[str, Any] = {
        "name": "echo",
        "description": "Echo the text back.",
        "input_schema": EchoIn,
        "output_schema": EchoOut,
        "handler": echo_handler,
        "tier": "read",
    }
    arguments.update(overrides)
    return define_tool(**arguments)


async def run(tool_: Tool[Any, Any, Any], arguments: object) -> Any:
    registry = Registry()
    registry.register(tool_)
    return await registry.dispatch(tool_.name, arguments, ToolContext(tenant_id="t1"))


# -- @tool and define_tool -------------------------------------------------------------------


@tool(tier="read")
async def shout(args: EchoIn, ctx: ToolContext) -> EchoOut:
    """Repeat the text in capitals.

    Longer explanation for the model.
    """
    return EchoOut(text=args.text.upper())


@tool(tier="read", name="whisper.v2")
def whisper(args: EchoIn) -> EchoOut:
    """Repeat the text in lower case."""
    return EchoOut(text=args.text.lower())


@tool(tier="read")
async def maybe_shout(args: EchoIn, ctx: ToolContext) -> EchoOut | Denied:
    """Shout unless the text is empty."""
    if not args.text:
        return Denied(reason="nothing to shout")
    return EchoOut(text=args.text.upper())


def test_tool_decorator_reads_models_from_postponed_annotations() -> None:
    assert shout.input_model is EchoIn
    assert shout.output_model is EchoOut
    assert maybe_shout.output_model is EchoOut


def test_tool_decorator_takes_name_from_the_function_and_description_from_its_docstring() -> None:
    assert shout.name == "shout"
    assert shout.description == "Repeat the text in capitals.\n\nLonger explanation for the model."
    assert whisper.name == "whisper.v2"


def test_tool_decorator_returns_a_tool_and_registers_nothing() -> None:
    assert isinstance(shout, Tool)
    assert shout.tier is RiskTier.READ


def test_explicit_description_wins_over_the_docstring() -> None:
    @tool(tier="read", description="Explicit.")
    def documented(args: EchoIn) -> EchoOut:
        """Docstring."""
        return EchoOut(text=args.text)

    assert documented.description == "Explicit."


@pytest.mark.anyio
async def test_async_and_sync_handlers_both_run() -> None:
    assert shout.is_async
    assert not whisper.is_async
    assert (await run(shout, {"text": "hi"})).output == {"text": "HI"}
    assert (await run(whisper, {"text": "HI"})).output == {"text": "hi"}


@pytest.mark.anyio
async def test_a_handler_may_take_only_the_input() -> None:
    assert not whisper.takes_context
    assert shout.takes_context
    assert (await run(whisper, {"text": "Ok"})).output == {"text": "ok"}


@pytest.mark.anyio
async def test_a_partial_of_an_async_function_is_recognised_as_async() -> None:
    async def handler(args: EchoIn, ctx: ToolContext, suffix: str) -> EchoOut:
        return EchoOut(text=args.text + suffix)

    defined = define(handler=functools.partial(handler, suffix="!"))
    assert defined.is_async
    assert (await run(defined, {"text": "hi"})).output == {"text": "hi!"}


def test_the_tool_is_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        shout.name = "other"  # type: ignore[misc]


def test_tool_decorator_without_docstring_or_description_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="docstring or description"):

        @tool(tier="read")
        def undocumented(args: EchoIn) -> EchoOut:
            return EchoOut(text=args.text)


def test_tool_decorator_without_an_input_annotation_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="annotate the parameter 'args' with its type"):

        @tool(tier="read")
        def bare(args, ctx: ToolContext) -> EchoOut:  # type: ignore[no-untyped-def]
            """Bare."""
            return EchoOut(text="")


def test_tool_decorator_without_a_return_annotation_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="annotate the return type"):

        @tool(tier="read")
        def no_return(args: EchoIn):  # type: ignore[no-untyped-def]
            """No return."""
            return EchoOut(text="")


def test_a_handler_with_three_positional_parameters_is_rejected() -> None:
    def handler(args: EchoIn, ctx: ToolContext, extra: int) -> EchoOut:
        return EchoOut(text="")

    with pytest.raises(ConfigurationError, match="handler must take"):
        define(handler=handler)


def test_a_generator_handler_is_refused_at_definition_not_at_its_first_call() -> None:
    def steps(args: EchoIn) -> Iterator[EchoOut]:
        yield EchoOut(text=args.text)

    async def async_steps(args: EchoIn) -> AsyncIterator[EchoOut]:
        yield EchoOut(text=args.text)

    for handler in (steps, async_steps):
        with pytest.raises(ConfigurationError, match="generator function"):
            define(handler=handler)
        with pytest.raises(ConfigurationError, match="generator function"):
            tool(tier="read", description="Steps.")(handler)


def test_decorator_mistakes_say_how_to_write_the_tool() -> None:
    with pytest.raises(TypeError, match="required keyword-only argument: 'tier'"):
        tool(echo_handler)  # type: ignore[call-arg, arg-type]
    with pytest.raises(ConfigurationError, match=r"write @tool\(tier=...\)"):
        tool(echo_handler, tier="read")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="'shout': @tool is applied twice"):
        tool(tier="read")(shout)  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="register takes a Tool, got function"):
        Registry().register(echo_handler)  # type: ignore[arg-type]


def test_a_read_tool_that_declares_itself_destructive_is_refused() -> None:
    # A read runs ungated: a risk saying it destroys would gate nothing.
    for declared in (risk(destructive=True), risk("data-delete", destructive=True)):
        with pytest.raises(ConfigurationError, match="says destructive=True"):
            define(risk_policy=declared)
    # A side effect alone is allowed: the read is then not read-only (its annotations say).
    assert define(risk_policy=risk("email")).risk_policy.side_effects == ("email",)
    assert define(risk_policy=READ_ONLY_RISK).risk_policy == READ_ONLY_RISK


# -- definition-time checks ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "has space", "x" * 129, "semi;colon", "ünï"])
def test_a_tool_name_outside_the_pattern_is_rejected(name: str) -> None:
    with pytest.raises(ConfigurationError, match="must use 1-128"):
        define(name=name)


def test_an_alias_outside_the_pattern_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="'bad alias' must use 1-128"):
        define(aliases=["bad alias"])


def test_an_alias_equal_to_the_name_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="alias repeats the canonical name"):
        define(aliases=["echo"])


@pytest.mark.parametrize("name", ["a", "A.b-c_d", "x" * 128])
def test_names_matching_the_pattern_are_accepted(name: str) -> None:
    assert define(name=name).name == name


@pytest.mark.parametrize("role", ["input_schema", "output_schema"])
def test_a_model_that_is_not_a_base_model_is_rejected(role: str) -> None:
    with pytest.raises(ConfigurationError, match="must be a pydantic BaseModel subclass"):
        define(**{role: dict})


@pytest.mark.parametrize("role", ["input_schema", "output_schema"])
def test_a_root_model_is_rejected_because_it_is_not_a_json_object(role: str) -> None:
    class Texts(RootModel[list[str]]):
        pass

    with pytest.raises(ConfigurationError, match="must describe a JSON object, not a RootModel"):
        define(**{role: Texts})


def test_an_input_that_declares_the_control_field_through_an_alias_is_rejected() -> None:
    class Sneaky(BaseModel):
        controls: dict[str, Any] = Field(alias="_charter")

    with pytest.raises(ConfigurationError, match="may not declare '_charter'"):
        define(input_schema=Sneaky)


def test_an_input_that_accepts_the_control_field_as_an_alias_choice_is_rejected() -> None:
    class Sneaky(BaseModel):
        controls: dict[str, Any] = Field(validation_alias=AliasChoices("controls", "_charter"))

    with pytest.raises(ConfigurationError, match="may not declare '_charter'"):
        define(input_schema=Sneaky)


def test_a_blank_description_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="description is required"):
        define(description="  ")


@pytest.mark.parametrize("tier", ["write", "sensitive", "destructive"])
def test_a_non_read_tool_without_a_risk_policy_is_rejected(tier: str) -> None:
    with pytest.raises(ConfigurationError, match=f"a '{tier}' tool must declare its risk_policy"):
        define(tier=tier)


def test_a_read_tool_without_a_risk_policy_gets_the_read_only_risk() -> None:
    defined = define()
    assert defined.risk_policy.destructive is False
    assert defined.risk_policy.reversible is True
    assert defined.risk_policy.side_effects == ()


def test_an_unknown_tier_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="tier must be one of"):
        define(tier="dangerous")


def test_an_unknown_option_is_rejected_by_name() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown option\(s\) \['scopes'\]"):
        define(scopes=["trips:read"])


def test_a_string_where_a_list_belongs_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="required_scopes must be a list, not a string"):
        define(required_scopes="trips:read")


@pytest.mark.parametrize("scope", ["trips", "trips:*", "*", "Trips:read", "trips:read "])
def test_an_invalid_required_scope_is_rejected(scope: str) -> None:
    with pytest.raises(ConfigurationError, match="must be 'resource:action'"):
        define(required_scopes=[scope])


def test_a_public_tool_cannot_be_delegable() -> None:
    with pytest.raises(ConfigurationError, match="public tool cannot be delegable"):
        define(auth="public", delegable=True)


def test_an_unknown_auth_mode_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="auth must be one of"):
        define(auth="root")


def test_an_unknown_enforcement_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="enforcement must be 'generic' or 'handler'"):
        define(enforcement="strict")


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, True, "5", 10**400])
def test_a_timeout_that_is_not_a_finite_positive_number_is_rejected(timeout: object) -> None:
    with pytest.raises(ConfigurationError, match="timeout must be a finite, positive number"):
        define(timeout=timeout)


def test_a_tenant_field_must_be_a_field_of_the_input() -> None:
    with pytest.raises(ConfigurationError, match="tenant_field 'tenant' is not a field"):
        define(tenant_field="tenant")
    assert define(tenant_field="text").tenant_field == "text"


def created_policy(**overrides: Any) -> ActionPolicy:
    arguments: dict[str, Any] = {
        "target_type": "trip",
        "target_lifecycle": "created",
        "created_target": CreatedTarget(
            command_target_type="trip-create-command", result_reference_type="trip"
        ),
    }
    arguments.update(overrides)
    return ActionPolicy(**arguments)


def define_created(policy: ActionPolicy, enforcement: str = "handler") -> Tool[Any, Any, Any]:
    return define(
        tier="write", risk_policy=WRITE_RISK, action_policy=policy, enforcement=enforcement
    )


def test_a_created_target_policy_with_handler_enforcement_is_accepted() -> None:
    assert define_created(created_policy()).action_policy == created_policy()


def test_a_created_target_policy_requires_handler_enforcement() -> None:
    with pytest.raises(ConfigurationError, match='requires enforcement="handler"'):
        define_created(created_policy(), enforcement="generic")


def test_a_created_target_policy_requires_kind_execute() -> None:
    with pytest.raises(ConfigurationError, match='requires kind="execute"'):
        define_created(created_policy(kind="read"))


def test_a_created_target_policy_requires_the_ledger() -> None:
    with pytest.raises(ConfigurationError, match='requires ledger="required"'):
        define_created(created_policy(ledger="optional"))


def test_a_created_target_policy_requires_its_command_metadata() -> None:
    with pytest.raises(ConfigurationError, match="missing created_target command metadata"):
        define_created(created_policy(created_target=None))


def test_created_target_types_must_be_non_empty() -> None:
    blank = CreatedTarget(command_target_type=" ", result_reference_type="trip")
    with pytest.raises(ConfigurationError, match="created_target types must be non-empty"):
        define_created(created_policy(created_target=blank))


def test_a_created_target_without_the_created_lifecycle_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match='without target_lifecycle="created"'):
        define_created(created_policy(target_lifecycle="existing"))


def test_an_action_policy_needs_a_target_type() -> None:
    with pytest.raises(ConfigurationError, match="target_type must be non-empty"):
        define(tier="write", risk_policy=WRITE_RISK, action_policy=ActionPolicy(target_type=""))


# -- input models -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_unknown_input_fields_are_rejected_by_default() -> None:
    outcome = await run(define(), {"text": "hi", "txet": "typo"})
    assert outcome.code is ErrorCode.INVALID_INPUT
    assert outcome.meta["issues"] == [
        {"loc": ["txet"], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}
    ]


@pytest.mark.anyio
async def test_a_model_that_allows_extra_fields_keeps_them() -> None:
    def handler(args: OpenIn) -> EchoOut:
        return EchoOut(text=f"{args.text}+{sorted(args.model_extra or {})}")

    outcome = await run(define(input_schema=OpenIn, handler=handler), {"text": "a", "more": 1})
    assert outcome.output == {"text": "a+['more']"}


@pytest.mark.anyio
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "NaN", "Infinity"])
async def test_nan_and_infinity_are_rejected(value: object) -> None:
    def handler(args: Measure) -> EchoOut:
        return EchoOut(text=str(args.value))

    outcome = await run(define(input_schema=Measure, handler=handler), {"value": value})
    assert outcome.code is ErrorCode.INVALID_INPUT
    assert outcome.meta["issues"][0]["loc"] == ["value"]
    # Strict input: the string "NaN" is no number at all.
    expected = "float_type" if isinstance(value, str) else "finite_number"
    assert outcome.meta["issues"][0]["type"] == expected


@pytest.mark.anyio
@pytest.mark.parametrize("value", [math.nan, math.inf, "-Infinity"])
async def test_nan_and_infinity_are_rejected_inside_nested_models(value: object) -> None:
    def handler(args: Reading) -> EchoOut:
        return EchoOut(text=str(args.measure.value))

    tool_ = define(input_schema=Reading, handler=handler)
    outcome = await run(tool_, {"measure": {"value": value}})
    assert outcome.code is ErrorCode.INVALID_INPUT
    # Strict input: the string "-Infinity" is no number at all.
    msg, kind = (
        ("Input should be a valid number", "float_type")
        if isinstance(value, str)
        else ("Input should be a finite number", "finite_number")
    )
    assert outcome.meta["issues"] == [{"loc": ["measure", "value"], "msg": msg, "type": kind}]
    assert (await run(tool_, {"measure": {"value": 1.5}})).output == {"text": "1.5"}


@pytest.mark.anyio
async def test_a_model_that_allows_nan_keeps_its_choice() -> None:
    class Loose(BaseModel):
        model_config = ConfigDict(allow_inf_nan=True)

        value: float

    def handler(args: Loose) -> EchoOut:
        return EchoOut(text=str(args.value))

    outcome = await run(define(input_schema=Loose, handler=handler), {"value": math.inf})
    assert outcome.output == {"text": "inf"}


# -- schemas ----------------------------------------------------------------------------------


def test_schemas_are_computed_once() -> None:
    defined = define(input_schema=Person)
    assert defined.input_schema is defined.input_schema
    assert defined.output_schema is defined.output_schema
    registry = Registry()
    registered = registry.register(defined)
    assert registered.entry["inputSchema"] is defined.input_schema
    assert registry.list()[0]["outputSchema"] is defined.output_schema


def test_schemas_are_draft_2020_12_with_schema_and_defs_kept() -> None:
    defined = define(input_schema=Person, output_schema=Person)
    for schema in (defined.input_schema, defined.output_schema):
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == JSON_SCHEMA_DIALECT
        assert set(schema["$defs"]) == {"Address"}
        assert schema["properties"]["home"] == {"$ref": "#/$defs/Address"}


class Trip(BaseModel):
    nights: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def long_stay(self) -> bool:
        return self.nights > 7


def test_the_input_schema_is_closed_and_the_output_schema_is_the_serialised_shape() -> None:
    defined = define(input_schema=Trip, output_schema=Trip)
    assert defined.input_schema["additionalProperties"] is False
    assert set(defined.input_schema["properties"]) == {"nights"}
    # Serialization mode describes what the caller receives, computed fields included.
    assert set(defined.output_schema["properties"]) == {"nights", "long_stay"}


def test_the_input_schema_validates_what_the_tool_accepts() -> None:
    defined = define(input_schema=Person)
    validator = jsonschema.Draft202012Validator(defined.input_schema)
    assert validator.is_valid({"name": "Ada", "home": {"city": "London"}})
    assert not validator.is_valid({"name": "Ada"})
    assert not validator.is_valid({"name": "Ada", "home": {"city": "x"}, "extra": 1})


def test_a_model_that_cannot_produce_a_schema_gets_a_runtime_only_stub() -> None:
    class Opaque:
        pass

    class Weird(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)

        thing: Opaque | None = None

    defined = define(output_schema=Weird)
    assert defined.output_schema["x-charter-schema-quality"] == "runtime-only"
    jsonschema.Draft202012Validator.check_schema(defined.output_schema)


def test_a_validator_on_the_input_model_still_runs() -> None:
    class Upper(BaseModel):
        text: str

        @field_validator("text")
        @classmethod
        def upper(cls, value: str) -> str:
            return value.upper()

    defined = define(input_schema=Upper)
    assert defined.validator.model_validate({"text": "a"}).text == "A"  # type: ignore[attr-defined]


# --- The closed-copy cache (charter.tool._closed_models) and the pydantic it relies on ------


def test_tools_sharing_a_model_share_its_closed_copy_and_a_subclass_gets_its_own() -> None:
    class Shared(BaseModel):
        text: str

    class Narrower(Shared):
        pass

    first = define(input_schema=Shared, output_schema=Shared)
    second = define(name="echo.second", input_schema=Shared, output_schema=Shared)
    third = define(name="echo.third", input_schema=Narrower)
    assert first.validator is second.validator is second.output_validator
    assert third.validator is not first.validator
    assert third.validator.__mro__[1] is Narrower
    assert vars(Narrower)[CLOSED_MODEL_ATTRIBUTE] is third.validator


def test_tools_sharing_a_model_share_its_json_schema_made_once() -> None:
    # A thousand tools with one output model keep one output schema, not a thousand.
    class Shared(BaseModel):
        text: str

    first = define(input_schema=Shared, output_schema=Shared)
    second = define(name="echo.second", input_schema=Shared, output_schema=Shared)
    assert first.output_schema is second.output_schema
    assert first.input_schema is second.input_schema
    assert first.output_schema == {
        "$schema": JSON_SCHEMA_DIALECT,
        **Shared.model_json_schema(mode="serialization"),
    }


def test_the_closed_copy_cache_relies_on_pydantic_as_pinned_here() -> None:
    class Base(BaseModel):
        model_config = ConfigDict(str_strip_whitespace=True)

        text: str

        @field_validator("text")
        @classmethod
        def upper(cls, value: str) -> str:
            return value.upper()

    fields, schema = dict(Base.model_fields), Base.model_json_schema()

    # A subclass whose namespace holds only model_config keeps the fields and validators
    # and merges its config into the parent's.
    closed: type[BaseModel] = type("Base", (Base,), {"model_config": ConfigDict(extra="forbid")})
    assert closed.model_fields.keys() == fields.keys()
    assert closed.model_validate({"text": " a "}).model_dump() == {"text": "A"}
    assert closed.model_config["str_strip_whitespace"] is True
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        closed.model_validate({"text": "a", "other": 1})

    # An attribute set on a model class after it is built is no field and changes neither
    # validation nor the schema ...
    setattr(Base, CLOSED_MODEL_ATTRIBUTE, closed)
    assert dict(Base.model_fields) == fields
    assert Base.model_json_schema() == schema
    assert Base.model_validate({"text": "b", "other": 1}).text == "B"

    # ... and a subclass built afterwards inherits it, so only vars() tells whose it is.
    class Child(Base):
        pass

    assert getattr(Child, CLOSED_MODEL_ATTRIBUTE) is closed
    assert CLOSED_MODEL_ATTRIBUTE not in vars(Child)
    assert closed_model(Child) is not closed
    assert closed_model(Base) is closed
