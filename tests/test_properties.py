from __future__ import annotations

from typing import Any

import anyio
import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict
from tests.builders import tiered_tool

from charter import ActionPolicy, Completed, Failed, PreparedAction, Registry, ToolContext
from charter.auth import js_trim
from charter.outcome import outcome_adapter
from charter.tool import Tool


class Text(BaseModel):
    text: str


class Nested(BaseModel):
    text: Text
    items: list[Text] = []
    score: float = 0.0


class Record(BaseModel):
    record_id: str
    count: int = 0


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")

    tag: str | None = None


def echo(args: Text) -> Text:
    return args


async def nested(args: Nested) -> Text:
    return Text(text=args.text.text + str(args.score))


def record(args: Record) -> Record:
    return args


def loose(args: Loose) -> Text:
    return Text(text=str(args.tag))


def resolve(args: Record, ctx: ToolContext) -> str:
    return args.record_id


def build_registry() -> Registry:
    registry = Registry()
    registry.register_all(
        [
            tiered_tool("echo", "read", echo, Text, Text, aliases=["say"]),
            tiered_tool("nested", "read", nested, Nested, Text),
            _record_tool(
                "records.update",
                "write",
                action_policy=ActionPolicy(target_type="record", command_target_field="record_id"),
            ),
            _record_tool("records.resolve", "sensitive", resolve_action_target=resolve),
            _record_tool("records.collection", "destructive"),  # anchored on the tenant
            _record_tool(
                "records.own",
                "write",
                action_policy=ActionPolicy(target_type="record"),
                enforcement="handler",
            ),
            tiered_tool("loose", "read", loose, Loose, Text),
        ]
    )
    return registry


def _record_tool(name: str, tier: str, **options: Any) -> Tool[Any, Any, Any]:
    """A tool that takes and returns a ``Record`` (a write gets ``WRITE_RISK``)."""
    return tiered_tool(name, tier, record, Record, Record, **options)


REGISTRY = build_registry()
SCHEMAS = {entry["name"]: entry["outputSchema"] for entry in REGISTRY.list()}
FIELDS = ["text", "items", "score", "record_id", "count", "tag", "_charter"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["", "  ", "r-1", " r-2 ", "NaN", "Infinity"])
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=16,
)
# Mostly well-formed objects (so handlers and output validation run), and anything at all.
plausible = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=8) | st.fixed_dictionaries({"text": st.text(max_size=8)}),
        "items": st.lists(st.fixed_dictionaries({"text": st.text(max_size=4)}), max_size=2),
        "score": st.floats(),
        "record_id": st.sampled_from(["", "  ", "r-1", " r-2 "]) | st.text(max_size=8),
        "count": st.integers(),
        "tag": st.none() | st.text(max_size=4),
    },
)
arguments = plausible | json_values | st.dictionaries(st.sampled_from(FIELDS), json_values)
known_names = st.sampled_from([*REGISTRY.names(), "say", "ecoh"])
tenants = st.sampled_from(["tenant-1", "", "  "]) | st.text(max_size=8)


def check_outcome(name: str, outcome: object) -> None:
    assert isinstance(outcome, Failed | Completed), outcome
    assert outcome_adapter.validate_json(outcome_adapter.dump_json(outcome)) == outcome
    if isinstance(outcome, Completed):
        registered = REGISTRY.get(name)
        assert registered is not None
        jsonschema.validate(outcome.output, SCHEMAS[registered.name])
    else:
        assert outcome.next_steps


@settings(max_examples=300, deadline=None)
@given(name=known_names, args=arguments, tenant=tenants)
def test_arbitrary_json_never_makes_dispatch_raise(name: str, args: Any, tenant: str) -> None:
    async def main() -> None:
        outcome = await REGISTRY.dispatch(name, args, ToolContext(tenant_id=tenant))
        check_outcome(name, outcome)

    anyio.run(main)


@settings(max_examples=300, deadline=None)
@given(name=known_names, args=arguments, tenant=tenants)
def test_arbitrary_json_never_makes_prepare_action_raise(name: str, args: Any, tenant: str) -> None:
    async def main() -> None:
        ctx = ToolContext(tenant_id=tenant)
        prepared = await REGISTRY.prepare_action(name, args, ctx)
        if isinstance(prepared, PreparedAction):
            # Targets are trimmed the way JavaScript trims (the ledger's reference semantics).
            assert prepared.target is None or prepared.target == js_trim(prepared.target) != ""
            check_outcome(name, await REGISTRY.dispatch_prepared(prepared, ctx))
        else:
            check_outcome(name, prepared)

    anyio.run(main)


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=300), args=json_values)
def test_arbitrary_names_never_make_prepare_or_dispatch_raise(name: str, args: Any) -> None:
    async def main() -> None:
        ctx = ToolContext(tenant_id="tenant-1")
        prepared = await REGISTRY.prepare_action(name, args, ctx)
        if isinstance(prepared, PreparedAction):
            check_outcome(name, await REGISTRY.dispatch_prepared(prepared, ctx))
        else:
            check_outcome(name, prepared)
        check_outcome(name, await REGISTRY.dispatch(name, args, ctx))

    anyio.run(main)
