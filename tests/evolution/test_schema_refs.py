"""Changes inside `$defs` models, wherever the `$ref` to them sits.

The same `$ref` text in both documents says nothing about the definition it points at: a
model reached through a list, an optional, a dict, another model or itself must be
compared, in the input and the output position alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pytest
from pydantic import BaseModel, create_model

from charter.evolution._schema_diff import Position, diff_schemas


def _trip(status: Any, **more: Any) -> type[BaseModel]:
    """A version of the model, always named `Trip`.

    Both documents then say `#/$defs/Trip` and only the definition differs: the case a
    text comparison of the `$ref` misses.
    """
    fields: dict[str, Any] = {"name": (str, ...), "nights": (int, ...), **more}
    fields["status"] = (status, ...)
    return create_model("Trip", **{k: v for k, v in fields.items() if v is not None})


_BOOKED_CANCELLED: Any = Literal["booked", "cancelled"]
_WITH_ARCHIVED: Any = Literal["booked", "cancelled", "archived"]
_BOOKED: Any = Literal["booked"]

Trip = _trip(_BOOKED_CANCELLED)
TripLosesAField = _trip(_WITH_ARCHIVED, nights=None)
"""An output break: `nights` removed and a status callers cannot handle."""
TripNeedsMore = _trip(_BOOKED_CANCELLED, guests=(int, ...))
"""An input break: a new required field inside the model."""
TripAcceptsMore = _trip(_WITH_ARCHIVED, note=(str | None, None))
"""Safe for inputs: an optional field and one more accepted status."""
TripSendsLess = _trip(_BOOKED, rating=(int, ...))
"""Safe for outputs: a status no longer produced and a new field always sent."""


def _leg(trip: type[BaseModel]) -> Any:
    """A second model in between: `list[Leg]` where `Leg.trip` is the trip model."""
    leg: type[BaseModel] = create_model("Leg", trip=(trip, ...))
    return list[leg]


WRAPPERS: dict[str, Callable[[type[BaseModel]], Any]] = {
    "direct": lambda m: m,
    "list": lambda m: list[m],  # type: ignore[valid-type]
    "optional": lambda m: m | None,
    "dict": lambda m: dict[str, m],  # type: ignore[valid-type]
    "optional list": lambda m: list[m] | None,  # type: ignore[valid-type]
    "nested two levels": _leg,
}


def _schema(wrap: Callable[[type[BaseModel]], Any], trip: type[BaseModel]) -> dict[str, Any]:
    built: type[BaseModel] = create_model("Result", x=(wrap(trip), ...))
    return built.model_json_schema(mode="serialization")


def _found(changes: tuple[Any, ...]) -> dict[tuple[str, str], str]:
    """`(kind, last path segment)` → severity, for changes that are not annotations."""
    return {(c.kind, c.path.rsplit(".", 1)[-1]): c.severity for c in changes}


def _verdicts(old: Any, new: Any, position: Position) -> set[str]:
    return {c.severity for c in diff_schemas(old, new, position=position)}


@pytest.mark.parametrize("wrap", WRAPPERS.values(), ids=list(WRAPPERS))
def test_a_field_removed_or_a_value_added_inside_an_output_model_is_breaking(
    wrap: Callable[[type[BaseModel]], Any],
) -> None:
    changes = diff_schemas(_schema(wrap, Trip), _schema(wrap, TripLosesAField), position="output")
    found = _found(changes)
    assert found[("property-removed", "nights")] == "breaking", changes
    assert found[("enum-values-added", "status")] == "breaking", changes


@pytest.mark.parametrize("wrap", WRAPPERS.values(), ids=list(WRAPPERS))
def test_a_required_field_added_inside_an_input_model_is_breaking(
    wrap: Callable[[type[BaseModel]], Any],
) -> None:
    changes = diff_schemas(_schema(wrap, Trip), _schema(wrap, TripNeedsMore), position="input")
    assert _found(changes)[("required-property-added", "guests")] == "breaking", changes


@pytest.mark.parametrize("wrap", WRAPPERS.values(), ids=list(WRAPPERS))
def test_safe_changes_inside_a_model_are_reported_but_not_breaking(
    wrap: Callable[[type[BaseModel]], Any],
) -> None:
    old = _schema(wrap, Trip)
    accepts_more = _schema(wrap, TripAcceptsMore)
    sends_less = _schema(wrap, TripSendsLess)
    assert _verdicts(old, accepts_more, "input") == {"compatible"}
    assert _verdicts(old, sends_less, "output") == {"compatible"}
    # ... and the same pairs the other way round are breaking.
    assert "breaking" in _verdicts(old, accepts_more, "output")
    assert "breaking" in _verdicts(old, sends_less, "input")


@pytest.mark.parametrize("wrap", WRAPPERS.values(), ids=list(WRAPPERS))
def test_an_unchanged_model_has_no_changes(wrap: Callable[[type[BaseModel]], Any]) -> None:
    assert diff_schemas(_schema(wrap, Trip), _schema(wrap, Trip), position="input") == ()


# --- recursive models ---------------------------------------------------------------------


def _folder_v1() -> type[BaseModel]:
    class Folder(BaseModel):
        name: str
        status: Literal["open", "closed"]
        subfolders: list[Folder] = []
        parent: Folder | None = None

    return Folder


def _folder_v2() -> type[BaseModel]:
    class Folder(BaseModel):
        status: Literal["open", "closed", "archived"]
        owner: str
        subfolders: list[Folder] = []
        parent: Folder | None = None

    return Folder


@pytest.mark.parametrize("wrap", WRAPPERS.values(), ids=list(WRAPPERS))
def test_a_change_inside_a_recursive_model_is_found_and_the_walk_ends(
    wrap: Callable[[type[BaseModel]], Any],
) -> None:
    old, new = _schema(wrap, _folder_v1()), _schema(wrap, _folder_v2())
    output = _found(diff_schemas(old, new, position="output"))
    assert output[("property-removed", "name")] == "breaking"
    assert output[("enum-values-added", "status")] == "breaking"
    inputs = _found(diff_schemas(old, new, position="input"))
    assert inputs[("required-property-added", "owner")] == "breaking"
    assert diff_schemas(old, old, position="output") == ()


# --- references charter cannot follow, and keywords it does not reason about -------------


def test_a_definition_removed_under_an_unchanged_ref_is_undecidable() -> None:
    old = {"$defs": {"X": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/X"}}}
    new = {"properties": {"a": {"$ref": "#/$defs/X"}}}
    [change] = diff_schemas(old, new, position="input")
    assert (change.kind, change.path, change.severity) == ("unresolvable-ref", "$.a", "undecidable")


def test_an_unresolvable_ref_on_both_sides_is_unchanged() -> None:
    schema = {"properties": {"a": {"$ref": "#/$defs/Missing"}}}
    assert diff_schemas(schema, dict(schema), position="input") == ()


def test_an_unsupported_keyword_whose_definition_changed_is_undecidable() -> None:
    def schema(values: list[str]) -> dict[str, Any]:
        return {
            "$defs": {"Banned": {"type": "string", "enum": values}},
            "properties": {"a": {"type": "string", "not": {"$ref": "#/$defs/Banned"}}},
        }

    [change] = diff_schemas(schema(["x"]), schema(["x", "y"]), position="input")
    assert (change.kind, change.path, change.severity) == (
        "unsupported-keyword",
        "$.a",
        "undecidable",
    )
    assert diff_schemas(schema(["x"]), schema(["x"]), position="input") == ()
