"""Declaring resources, templates and prompts: what is accepted, and what is refused early."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from charter import ConfigurationError, Registry, ToolContext, prompt, resource
from charter.resources import UriTemplate


class TripRef(BaseModel):
    trip_id: str


class Numbers(BaseModel):
    count: int


def test_a_template_matches_one_segment_per_variable_and_decodes_it() -> None:
    template = UriTemplate("trip://{trip_id}/notes/{note}")
    assert template.variables == ("trip_id", "note")
    assert template.match("trip://T-1/notes/a%20b") == {"trip_id": "T-1", "note": "a b"}
    assert template.match("trip://T-1/x/notes/a") is None  # no '/' inside a variable
    assert template.match("trip://T-1/notes/") is None
    assert template.expand({"trip_id": "T 1", "note": "a/b"}) == "trip://T%201/notes/a%2Fb"


@pytest.mark.parametrize("uri", ["trip://{a}/{a}", "trip://{a", "trip://{a-b}", "trip://{+a}"])
def test_malformed_templates_are_refused(uri: str) -> None:
    with pytest.raises(ConfigurationError):
        UriTemplate(uri)


def test_a_templates_model_must_name_exactly_its_variables() -> None:
    with pytest.raises(ConfigurationError, match="template variables"):

        @resource("trip://{id}")
        def wrong(ref: TripRef) -> str:
            """Wrong field."""
            return ""

    with pytest.raises(ConfigurationError, match="as a pydantic model"):

        @resource("trip://{trip_id}")
        def missing() -> str:
            """No model."""
            return ""


def test_bad_scopes_auth_modes_names_and_parameters_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        resource("x://a", name="a", required_scopes=("trips:*",))(lambda: "")
    with pytest.raises(ConfigurationError, match="auth"):
        resource("x://a", name="a", description="d", auth="everyone")(lambda: "")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="spaces"):
        resource("x://a b", name="a", description="d")(lambda: "")
    with pytest.raises(ConfigurationError, match="unknown arguments"):
        resource("trip://{trip_id}", description="d", complete={"nope": lambda v, c: []})(
            _read_trip
        )
    with pytest.raises(ConfigurationError, match="must be a str"):

        @prompt()
        def counted(args: Numbers) -> str:
            """Not strings."""
            return ""

    with pytest.raises(ConfigurationError, match="description"):
        prompt("p")(lambda: "")
    with pytest.raises(ConfigurationError, match="parameter"):

        @prompt()
        def odd(x: int) -> str:
            """Not a model."""
            return ""


def _read_trip(ref: TripRef, ctx: ToolContext) -> str:
    """A trip."""
    return ref.trip_id


def test_a_uri_or_prompt_name_registered_twice_is_refused() -> None:
    registry = Registry()
    trip = resource("trip://{trip_id}")(_read_trip)
    registry.register_content(trip)
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register_content(trip)
    hello = prompt("hello", description="Say hello.")(lambda: "hi")
    registry.register_content(hello)
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register_content(hello)
    assert registry.content.find("trip://T-1") == (trip, {"trip_id": "T-1"})
    assert registry.content.find("trip://") is None
