"""Schema pairs judged in the input and the output position (table-driven), plus properties."""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, create_model

from charter.evolution._schema_diff import Position, SchemaChange, compare_schemas, diff_schemas


def model(*, closed: bool = False, **fields: Any) -> dict[str, Any]:
    """The validation JSON Schema of a pydantic model with these fields."""
    config = ConfigDict(extra="forbid") if closed else None
    built: type[BaseModel] = create_model("M", __config__=config, **fields)
    return built.model_json_schema()


def field(annotation: Any, default: Any = ...) -> dict[str, Any]:
    """The schema of a model with a single field `x`."""
    return model(x=(annotation, default))


def verdict(changes: tuple[SchemaChange, ...]) -> str:
    severities = {c.severity for c in changes}
    for severity in ("breaking", "undecidable"):
        if severity in severities:
            return severity
    return "compatible"


# --- models used by several pairs ---------------------------------------------------------


class Cabin(enum.Enum):
    economy = "economy"
    premium = "premium"
    business = "business"


class SmallCabin(enum.Enum):
    economy = "economy"
    business = "business"


class Cat(BaseModel):
    kind: Literal["cat"]
    name: str


class Dog(BaseModel):
    kind: Literal["dog"]
    bark: bool = True


class LoudDog(BaseModel):
    model_config = ConfigDict(title="Dog")
    kind: Literal["dog"]
    bark: bool


class Fish(BaseModel):
    kind: Literal["fish"]


class Address(BaseModel):
    country: Literal["fr", "de", "it"]


class NarrowAddress(BaseModel):
    model_config = ConfigDict(title="Address")
    country: Literal["fr", "de"]


class Node(BaseModel):
    value: int
    children: list[Node] = []


class NodeV2(BaseModel):
    model_config = ConfigDict(title="Node")
    value: Annotated[int, Field(ge=0)]
    children: list[NodeV2] = []


@dataclass(frozen=True)
class Pair:
    id: str
    old: Any
    new: Any
    kind: str | None
    """A change of this kind must be reported (None: no change at all)."""
    input: str
    """The overall verdict in the input position."""
    output: str
    """The overall verdict in the output position."""
    path: str | None = None


REF_X = {"$defs": {"X": {"type": "string", "title": "X"}}}

PAIRS = [
    # objects -------------------------------------------------------------------------------
    Pair(
        "optional field added",
        model(a=(int, ...)),
        model(a=(int, ...), b=(int | None, None)),
        "property-added",
        "compatible",
        "compatible",
        "$.b",
    ),
    Pair(
        "optional field removed, additional properties open",
        model(a=(int, ...), b=(int | None, None)),
        model(a=(int, ...)),
        "property-removed",
        "compatible",
        "breaking",
        "$.b",
    ),
    Pair(
        "optional field removed, additional properties closed",
        model(closed=True, a=(int, ...), b=(int | None, None)),
        model(closed=True, a=(int, ...)),
        "property-removed",
        "breaking",
        "breaking",
    ),
    Pair(
        "field removed while additional properties become closed",
        model(a=(int, ...), b=(int, ...)),
        model(closed=True, a=(int, ...)),
        "property-removed",
        "breaking",
        "breaking",
    ),
    Pair(
        "field removed from a closed input that opens",
        model(closed=True, a=(int, ...), b=(int, ...)),
        model(a=(int, ...)),
        "property-removed",
        "compatible",
        "breaking",
    ),
    Pair(
        "required field added",
        model(a=(int, ...)),
        model(a=(int, ...), b=(str, ...)),
        "required-property-added",
        "breaking",
        "compatible",
    ),
    Pair(
        "required field removed",
        model(a=(int, ...), b=(str, ...)),
        model(a=(int, ...)),
        "property-removed",
        "compatible",
        "breaking",
    ),
    Pair(
        "field made required",
        model(a=(int, 0)),
        model(a=(int, ...)),
        "property-now-required",
        "breaking",
        "compatible",
    ),
    Pair(
        "field made optional",
        model(a=(int, ...)),
        model(a=(int, 0)),
        "property-now-optional",
        "compatible",
        "breaking",
    ),
    Pair(
        "additional properties closed",
        model(a=(int, ...)),
        model(closed=True, a=(int, ...)),
        "additional-properties-closed",
        "breaking",
        "compatible",
    ),
    Pair(
        "additional properties opened",
        model(closed=True, a=(int, ...)),
        model(a=(int, ...)),
        "additional-properties-opened",
        "compatible",
        "compatible",
    ),
    Pair(
        "dict values narrowed",
        field(dict[str, int | str]),
        field(dict[str, int]),
        "union-member-removed",
        "breaking",
        "compatible",
        "$.x.*",
    ),
    Pair(
        "dict values widened",
        field(dict[str, int]),
        field(dict[str, int | str]),
        "union-member-added",
        "compatible",
        "breaking",
        "$.x.*",
    ),
    # types ---------------------------------------------------------------------------------
    Pair(
        "integer widened to number",
        field(int),
        field(float),
        "type-widened",
        "compatible",
        "breaking",
    ),
    Pair(
        "number narrowed to integer",
        field(float),
        field(int),
        "type-narrowed",
        "breaking",
        "compatible",
    ),
    Pair(
        "string changed to integer", field(str), field(int), "type-changed", "breaking", "breaking"
    ),
    Pair(
        "null added (Optional)",
        field(int),
        field(int | None, None),
        "union-member-added",
        "compatible",
        "breaking",
    ),
    Pair(
        "null removed",
        field(int | None, None),
        field(int, 0),
        "union-member-removed",
        "breaking",
        "compatible",
    ),
    Pair(
        "type removed from a union",
        field(int | str),
        field(int),
        "union-member-removed",
        "breaking",
        "compatible",
    ),
    Pair(
        "type added to a union",
        field(int),
        field(int | str),
        "union-member-added",
        "compatible",
        "breaking",
    ),
    Pair(
        "type list and anyOf are the same union",
        {"type": ["string", "null"]},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        None,
        "compatible",
        "compatible",
    ),
    Pair(
        "type constrained where any was allowed",
        {},
        {"type": "string"},
        "type-narrowed",
        "breaking",
        "compatible",
    ),
    Pair(
        "type constraint dropped", {"type": "string"}, {}, "type-widened", "compatible", "breaking"
    ),
    # enums and consts ----------------------------------------------------------------------
    Pair(
        "enum value removed",
        field(Literal["a", "b", "c"]),
        field(Literal["a", "b"]),
        "enum-values-removed",
        "breaking",
        "compatible",
    ),
    Pair(
        "enum value added",
        field(Literal["a", "b"]),
        field(Literal["a", "b", "c"]),
        "enum-values-added",
        "compatible",
        "breaking",
    ),
    Pair(
        "Enum class loses a member ($defs)",
        field(Cabin),
        field(SmallCabin),
        "enum-values-removed",
        "breaking",
        "compatible",
        "$.x",
    ),
    Pair(
        "Enum class gains a member ($defs)",
        field(SmallCabin),
        field(Cabin),
        "enum-values-added",
        "compatible",
        "breaking",
        "$.x",
    ),
    Pair(
        "free string limited to an enum",
        field(str),
        field(Literal["a", "b"]),
        "enum-added",
        "breaking",
        "compatible",
    ),
    Pair(
        "enum opened to any string",
        field(Literal["a", "b"]),
        field(str),
        "enum-removed",
        "compatible",
        "breaking",
    ),
    Pair(
        "const changed",
        field(Literal["x"]),
        field(Literal["y"]),
        "enum-values-removed",
        "breaking",
        "breaking",
    ),
    # bounds --------------------------------------------------------------------------------
    Pair(
        "minimum raised",
        field(Annotated[int, Field(ge=0)]),
        field(Annotated[int, Field(ge=1)]),
        "bound-tightened",
        "breaking",
        "compatible",
    ),
    Pair(
        "minimum lowered",
        field(Annotated[int, Field(ge=1)]),
        field(Annotated[int, Field(ge=0)]),
        "bound-relaxed",
        "compatible",
        "breaking",
    ),
    Pair(
        "maximum lowered",
        field(Annotated[int, Field(le=10)]),
        field(Annotated[int, Field(le=5)]),
        "bound-tightened",
        "breaking",
        "compatible",
    ),
    Pair(
        "maximum removed",
        field(Annotated[int, Field(le=10)]),
        field(int),
        "bound-relaxed",
        "compatible",
        "breaking",
    ),
    Pair(
        "inclusive minimum made exclusive",
        field(Annotated[float, Field(ge=0)]),
        field(Annotated[float, Field(gt=0)]),
        "bound-tightened",
        "breaking",
        "compatible",
    ),
    Pair(
        "exclusive maximum made inclusive",
        field(Annotated[float, Field(lt=1)]),
        field(Annotated[float, Field(le=1)]),
        "bound-relaxed",
        "compatible",
        "breaking",
    ),
    Pair(
        "maxLength added",
        field(str),
        field(Annotated[str, Field(max_length=10)]),
        "bound-tightened",
        "breaking",
        "compatible",
    ),
    Pair(
        "maxLength raised",
        field(Annotated[str, Field(max_length=10)]),
        field(Annotated[str, Field(max_length=20)]),
        "bound-relaxed",
        "compatible",
        "breaking",
    ),
    Pair(
        "minLength added",
        field(str),
        field(Annotated[str, Field(min_length=1)]),
        "bound-tightened",
        "breaking",
        "compatible",
    ),
    Pair(
        "minItems added",
        field(list[int]),
        field(Annotated[list[int], Field(min_length=1)]),
        "bound-tightened",
        "breaking",
        "compatible",
    ),
    Pair(
        "maxItems removed",
        field(Annotated[list[int], Field(max_length=3)]),
        field(list[int]),
        "bound-relaxed",
        "compatible",
        "breaking",
    ),
    Pair(
        "multipleOf made stricter",
        field(Annotated[int, Field(multiple_of=2)]),
        field(Annotated[int, Field(multiple_of=4)]),
        "bound-tightened",
        "breaking",
        "compatible",
    ),
    Pair(
        "multipleOf made looser",
        field(Annotated[int, Field(multiple_of=4)]),
        field(Annotated[int, Field(multiple_of=2)]),
        "bound-relaxed",
        "compatible",
        "breaking",
    ),
    Pair(
        "multipleOf changed across",
        field(Annotated[int, Field(multiple_of=2)]),
        field(Annotated[int, Field(multiple_of=3)]),
        "multiple-of-changed",
        "breaking",
        "breaking",
    ),
    Pair(
        "items made unique",
        field(list[int]),
        field(set[int]),
        "bound-tightened",
        "breaking",
        "compatible",
    ),
    # strings -------------------------------------------------------------------------------
    Pair(
        "pattern added",
        field(str),
        field(Annotated[str, Field(pattern="^[a-z]+$")]),
        "pattern-added",
        "breaking",
        "compatible",
    ),
    Pair(
        "pattern removed",
        field(Annotated[str, Field(pattern="^[a-z]+$")]),
        field(str),
        "pattern-removed",
        "compatible",
        "breaking",
    ),
    Pair(
        "pattern changed",
        field(Annotated[str, Field(pattern="^[a-z]+$")]),
        field(Annotated[str, Field(pattern="^[a-z0-9]+$")]),
        "pattern-changed",
        "undecidable",
        "undecidable",
    ),
    Pair(
        "format added",
        field(str),
        field(datetime.datetime),
        "format-added",
        "breaking",
        "compatible",
    ),
    Pair(
        "format removed",
        field(datetime.date),
        field(str),
        "format-removed",
        "compatible",
        "breaking",
    ),
    Pair(
        "format changed between exclusive formats",
        field(datetime.date),
        field(datetime.datetime),
        "format-changed",
        "breaking",
        "breaking",
    ),
    Pair(
        "format widened to a superset",
        {"type": "string", "format": "uri"},
        {"type": "string", "format": "uri-reference"},
        "format-widened",
        "compatible",
        "breaking",
    ),
    Pair(
        "unknown formats changed",
        {"type": "string", "format": "x-sku"},
        {"type": "string", "format": "x-ean"},
        "format-changed",
        "undecidable",
        "undecidable",
    ),
    # annotations ---------------------------------------------------------------------------
    Pair(
        "description changed",
        field(Annotated[int, Field(description="old")]),
        field(Annotated[int, Field(description="new")]),
        "description-changed",
        "compatible",
        "compatible",
    ),
    Pair(
        "title changed",
        field(Annotated[int, Field(title="A")]),
        field(Annotated[int, Field(title="B")]),
        "title-changed",
        "compatible",
        "compatible",
    ),
    Pair(
        "default changed",
        field(int, 1),
        field(int, 2),
        "default-changed",
        "compatible",
        "compatible",
    ),
    Pair(
        "field deprecated",
        field(int, 1),
        field(Annotated[int, Field(deprecated=True)], 1),
        "deprecated-changed",
        "compatible",
        "compatible",
    ),
    # arrays --------------------------------------------------------------------------------
    Pair(
        "item type changed",
        field(list[int]),
        field(list[str]),
        "type-changed",
        "breaking",
        "breaking",
        "$.x[*]",
    ),
    Pair(
        "items may now be null",
        field(list[int]),
        field(list[int | None]),
        "union-member-added",
        "compatible",
        "breaking",
        "$.x[*]",
    ),
    Pair(
        "tuple position changed",
        field(tuple[int, str]),
        field(tuple[int, int]),
        "type-changed",
        "breaking",
        "breaking",
        "$.x[1]",
    ),
    Pair(
        "tuple grew a position",
        field(tuple[int]),
        field(tuple[int, str]),
        "bound-tightened",
        "breaking",
        "breaking",
    ),
    # $ref, $defs, allOf, recursion ---------------------------------------------------------
    Pair(
        "enum narrowed inside a $defs model",
        field(Address),
        field(NarrowAddress),
        "enum-values-removed",
        "breaking",
        "compatible",
        "$.x.country",
    ),
    Pair(
        "recursive model unchanged",
        Node.model_json_schema(),
        Node.model_json_schema(),
        None,
        "compatible",
        "compatible",
    ),
    Pair(
        "recursive model tightened",
        Node.model_json_schema(),
        NodeV2.model_json_schema(),
        "bound-tightened",
        "breaking",
        "compatible",
        "$.value",
    ),
    Pair(
        "single-member allOf is its member",
        {**REF_X, "properties": {"a": {"allOf": [{"$ref": "#/$defs/X"}], "description": "d"}}},
        {**REF_X, "properties": {"a": {"$ref": "#/$defs/X", "description": "d"}}},
        None,
        "compatible",
        "compatible",
    ),
    Pair(
        "$ref inlined",
        {**REF_X, "properties": {"a": {"$ref": "#/$defs/X"}}},
        {"properties": {"a": {"type": "string", "title": "X"}}},
        None,
        "compatible",
        "compatible",
    ),
    Pair(
        "unresolvable $ref",
        {"properties": {"a": {"$ref": "#/$defs/Missing"}}},
        {"properties": {"a": {"type": "string"}}},
        "unresolvable-ref",
        "undecidable",
        "undecidable",
    ),
    Pair(
        "self-referencing $ref",
        {"$defs": {"L": {"$ref": "#/$defs/L"}}, "$ref": "#/$defs/L"},
        {"type": "string"},
        "unresolvable-ref",
        "undecidable",
        "undecidable",
    ),
    # discriminated unions ------------------------------------------------------------------
    Pair(
        "union member added",
        field(Cat | Dog),
        field(Cat | Dog | Fish),
        "union-member-added",
        "compatible",
        "breaking",
    ),
    Pair(
        "union member removed",
        field(Cat | Dog),
        field(Cat),
        "union-member-removed",
        "breaking",
        "compatible",
    ),
    Pair(
        "field in a union member made required",
        field(Annotated[Cat | Dog, Field(discriminator="kind")]),
        field(Annotated[Cat | LoudDog, Field(discriminator="kind")]),
        "property-now-required",
        "breaking",
        "compatible",
        "$.x<LoudDog>.bark",
    ),
    Pair(
        "const member widened to its type",
        {"anyOf": [{"type": "string"}, {"const": 1}]},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "enum-removed",
        "compatible",
        "breaking",
        "$<integer>",
    ),
    Pair(
        "member merged into a wider one",
        {"anyOf": [{"type": "string"}, {"const": "x"}]},
        {"type": "string"},
        "union-member-merged",
        "compatible",
        "compatible",
    ),
    # what charter cannot decide ------------------------------------------------------------
    Pair(
        "`not` changed",
        {"not": {"type": "string"}},
        {"not": {"type": "integer"}},
        "unsupported-keyword",
        "undecidable",
        "undecidable",
    ),
    Pair(
        "if/then added",
        {"type": "object"},
        {"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}},
        "unsupported-keyword",
        "undecidable",
        "undecidable",
    ),
    Pair("schema closed to false", True, False, "schema-closed", "breaking", "compatible"),
    Pair("schema opened from false", False, True, "schema-opened", "compatible", "breaking"),
]


def test_the_table_has_at_least_forty_pairs_with_unique_names() -> None:
    assert len(PAIRS) >= 40
    assert len({p.id for p in PAIRS}) == len(PAIRS)


@pytest.mark.parametrize("pair", PAIRS, ids=[p.id for p in PAIRS])
@pytest.mark.parametrize("position", ["input", "output"])
def test_schema_pair_is_judged_for_its_position(pair: Pair, position: Position) -> None:
    changes = diff_schemas(pair.old, pair.new, position=position)
    expected = pair.input if position == "input" else pair.output
    assert verdict(changes) == expected, changes
    if pair.kind is None:
        assert all(c.severity == "compatible" for c in changes), changes
        if expected == "compatible":
            assert not [c for c in changes if c.kind.startswith("union-member-added")]
    else:
        kinds = {(c.kind, c.path) for c in changes}
        assert any(kind == pair.kind for kind, _ in kinds), changes
        if pair.path is not None:
            assert (pair.kind, pair.path) in kinds, changes


def test_identical_schemas_have_no_changes_and_the_same_relation() -> None:
    schema = field(Annotated[Cat | Dog, Field(discriminator="kind")])
    comparison = compare_schemas(schema, schema)
    assert comparison.findings == ()
    assert comparison.relation == "same"


@pytest.mark.parametrize(
    ("old", "new", "relation"),
    [
        (field(Literal["a", "b"]), field(Literal["a"]), "subset"),
        (field(Literal["a"]), field(Literal["a", "b"]), "superset"),
        (field(Literal["a"]), field(Literal["b"]), "incomparable"),
        (
            field(Annotated[str, Field(pattern="a")]),
            field(Annotated[str, Field(pattern="b")]),
            "undecidable",
        ),
        (field(int, 1), field(int, 2), "same"),
        (
            model(closed=True, a=(int, ...), b=(int, ...)),
            model(closed=True, a=(int, ...)),
            "incomparable",
        ),
        (
            {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 0}]},
            {"anyOf": [{"type": "null"}, {"type": "string"}]},
            "superset",
        ),
    ],
)
def test_relation_says_what_the_new_schema_accepts(old: Any, new: Any, relation: str) -> None:
    assert compare_schemas(old, new).relation == relation


def test_a_change_inside_a_shared_definition_is_reported_at_every_use() -> None:
    old = model(home=(Address, ...), work=(Address, ...))
    new = model(home=(NarrowAddress, ...), work=(NarrowAddress, ...))
    paths = {c.path for c in diff_schemas(old, new, position="input") if c.severity == "breaking"}
    assert paths == {"$.home.country", "$.work.country"}


def test_recursive_schemas_compare_to_a_fixed_point() -> None:
    changes = diff_schemas(Node.model_json_schema(), NodeV2.model_json_schema(), position="input")
    # The definition is compared once; meeting it again through `children` adds nothing.
    assert [(c.path, c.kind) for c in changes if c.severity == "breaking"] == [
        ("$.value", "bound-tightened")
    ]


# --- properties ---------------------------------------------------------------------------

_NAMES = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)

_LEAVES = st.one_of(
    st.just({"type": "string"}),
    st.just({"type": "integer", "minimum": 0}),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 50)),
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True).map(
        lambda values: {"type": "string", "enum": values}
    ),
)


@st.composite
def _object_schema(draw: st.DrawFn, children: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    properties = draw(st.dictionaries(_NAMES, children, max_size=4))
    names = sorted(properties)
    required = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    extra = draw(st.sampled_from([None, True, False]))
    if extra is not None:
        schema["additionalProperties"] = extra
    return schema


def _object(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return _object_schema(children)


_SCHEMAS = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        _object(children),
        children.map(lambda items: {"type": "array", "items": items}),
        st.lists(children, min_size=2, max_size=3).map(lambda members: {"anyOf": members}),
    ),
    max_leaves=8,
)


@given(base=_object(_SCHEMAS), name=_NAMES, added=_SCHEMAS)
def test_adding_an_optional_field_to_an_input_is_never_breaking(
    base: dict[str, Any], name: str, added: dict[str, Any]
) -> None:
    if name in base["properties"]:
        name += "_new"
    new = {**base, "properties": {**base["properties"], name: added}}
    changes = diff_schemas(base, new, position="input")
    assert [c.kind for c in changes] == ["property-added"]
    assert all(c.severity == "compatible" for c in changes)


@given(base=_object(_SCHEMAS), data=st.data())
def test_removing_a_required_field_from_an_output_is_always_breaking(
    base: dict[str, Any], data: st.DataObject
) -> None:
    if not base["required"]:
        name = data.draw(_NAMES)
        base = {
            **base,
            "properties": {**base["properties"], name: {"type": "string"}},
            "required": [name],
        }
    name = data.draw(st.sampled_from(base["required"]))
    new = {
        **base,
        "properties": {k: v for k, v in base["properties"].items() if k != name},
        "required": [r for r in base["required"] if r != name],
    }
    changes = diff_schemas(base, new, position="output")
    assert any(
        c.kind == "property-removed" and c.path.endswith(name) and c.severity == "breaking"
        for c in changes
    ), changes


@given(schema=_SCHEMAS)
def test_a_schema_compared_with_itself_has_no_changes(schema: dict[str, Any]) -> None:
    assert compare_schemas(schema, schema).relation == "same"
    assert diff_schemas(schema, dict(schema), position="input") == ()
