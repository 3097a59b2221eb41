"""Local ``$ref``s (where a JSON pointer points, which references a schema holds) and types."""

from __future__ import annotations

import pytest

from charter._json_schema import iter_refs, json_type, resolve_pointer

SCHEMA = {
    "type": "object",
    "properties": {"trip": {"$ref": "#/$defs/Trip"}},
    "$defs": {
        "Trip": {"type": "object", "properties": {"legs": {"items": {"$ref": "#/$defs/Leg"}}}},
        "Leg": {"type": "string"},
        "a/b": {"const": "slash"},
        "m~n": {"const": "tilde"},
        "with space": {"const": "space"},
    },
    "prefixItems": [{"const": 0}, {"const": 1}],
}


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("#/$defs/Leg", {"type": "string"}),
        ("#/$defs/a~1b", {"const": "slash"}),
        ("#/$defs/m~0n", {"const": "tilde"}),
        ("#/$defs/with%20space", {"const": "space"}),
        ("#/prefixItems/1", {"const": 1}),
        ("#/properties/trip/$ref", "#/$defs/Trip"),
    ],
)
def test_a_local_pointer_is_unescaped_and_followed(ref: str, expected: object) -> None:
    assert resolve_pointer(SCHEMA, ref) == expected


def test_the_empty_fragment_is_the_whole_document() -> None:
    assert resolve_pointer(SCHEMA, "#") is SCHEMA


@pytest.mark.parametrize(
    "ref",
    [
        "#/$defs/Missing",
        "#/$defs/a/b",  # an unescaped slash is two tokens
        "#/prefixItems/2",
        "#/prefixItems/-1",
        "#/$defs/Leg/type/deeper",
        "https://example.com/schema.json#/$defs/Leg",
        "other.json#/$defs/Leg",
        "$defs/Leg",
    ],
)
def test_a_pointer_to_nothing_or_outside_the_document_is_none(ref: str) -> None:
    assert resolve_pointer(SCHEMA, ref) is None


def test_every_reference_is_found_once_per_occurrence_and_none_is_followed() -> None:
    assert sorted(iter_refs(SCHEMA)) == ["#/$defs/Leg", "#/$defs/Trip"]
    assert list(iter_refs({"const": {"$ref": 5}, "enum": ["#/x"]})) == []


def test_references_are_found_at_any_depth_without_recursion() -> None:
    deep: dict[str, object] = {"$ref": "#/bottom"}
    for _ in range(100_000):  # far past the interpreter's recursion limit
        deep = {"items": [deep]}
    assert list(iter_refs(deep)) == ["#/bottom"]


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "boolean"),
        (3, "integer"),
        (3.0, "integer"),  # JSON Schema: a number with a zero fraction is an integer
        (3.5, "number"),
        (float("inf"), "number"),
        ("3", "string"),
        ([3], "array"),
        ({"n": 3}, "object"),
    ],
)
def test_a_json_value_has_the_type_name_json_schema_gives_it(value: object, name: str) -> None:
    assert json_type(value) == name
