"""Input means what the published JSON Schema says: strict JSON types, lax only by opt-in."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict, Field

from charter import Completed, ErrorCode, Failed, Lax, Registry, ToolContext, tool
from charter.auth import Principal
from charter.host import Host

pytestmark = pytest.mark.anyio

AGENT = Principal(
    subject="agent-7", tenant_id="acme", scopes=frozenset({"trips:read"}), kind="agent"
)


class Status(StrEnum):
    PLANNED = "planned"
    CANCELLED = "cancelled"


class Window(BaseModel):
    nights: int


class TripSearch(BaseModel):
    text: str | None = Field(default=None, max_length=100)
    limit: int = Field(default=20, ge=1, le=50)
    status: Status | None = None
    after: datetime | None = None
    owner: uuid.UUID | None = None
    window: Window | None = None
    tags: tuple[str, ...] = ()


class TripList(BaseModel):
    trips: list[str]
    limit: int


class LaxSearch(BaseModel):
    model_config = ConfigDict(strict=False)

    limit: int = 20


class PageSearch(BaseModel):
    limit: int = 20
    page: Annotated[int, Lax()] = 1


@tool(name="trips.search", tier="read", required_scopes=["trips:read"])
def search(args: TripSearch) -> TripList:
    """Find trips."""
    return TripList(trips=[], limit=args.limit)


@tool(name="trips.search_lax", tier="read", required_scopes=["trips:read"])
def search_lax(args: LaxSearch) -> TripList:
    """Find trips, coercing the limit."""
    return TripList(trips=[], limit=args.limit)


@tool(name="trips.page", tier="read", required_scopes=["trips:read"])
def page(args: PageSearch) -> TripList:
    """Find trips, coercing only the page."""
    return TripList(trips=[], limit=args.limit * 100 + args.page)


@pytest.fixture
def host() -> Host:
    registry = Registry()
    registry.register_all([search, search_lax, page])
    return Host(registry)


async def call(host: Host, name: str, arguments: Any) -> Any:
    return await host.invoke(name, arguments, AGENT)


@pytest.mark.parametrize(
    "arguments",
    [
        {"limit": True},
        {"limit": "2"},
        {"limit": 2.5},
        {"text": 5},
        {"status": "PLANNED"},
        {"window": {"nights": "3"}},
        {"tags": "beach"},
        {"_charter": None},
    ],
    ids=str,
)
async def test_input_outside_the_published_schema_is_refused(
    host: Host, arguments: dict[str, Any]
) -> None:
    schema = host.registry.get("trips.search")
    assert schema is not None
    published = {k: v for k, v in arguments.items() if k != "_charter"}
    if published:
        # What the manifest publishes refuses it too: validation means the same thing.
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(published, schema.entry["inputSchema"])
    outcome = await call(host, "trips.search", arguments)
    assert isinstance(outcome, Failed), outcome
    assert outcome.code == ErrorCode.INVALID_INPUT


async def test_json_forms_of_richer_types_are_accepted(host: Host) -> None:
    arguments = {
        "limit": 5,
        "status": "planned",
        "after": "2026-12-01T10:00:00Z",
        "owner": str(uuid.UUID(int=7)),
        "window": {"nights": 3},
        "tags": ["beach", "city"],
    }
    jsonschema.validate(arguments, host.registry.get("trips.search").entry["inputSchema"])  # type: ignore[union-attr]
    outcome = await call(host, "trips.search", arguments)
    assert isinstance(outcome, Completed), outcome
    assert outcome.output == {"trips": [], "limit": 5}


async def test_an_integer_written_with_a_zero_fraction_is_an_integer(host: Host) -> None:
    # JSON Schema counts 2.0 an integer (pydantic's strict mode alone would not).
    arguments = {"limit": 2.0, "window": {"nights": 3.0}}
    jsonschema.validate(arguments, host.registry.get("trips.search").entry["inputSchema"])  # type: ignore[union-attr]
    outcome = await call(host, "trips.search", arguments)
    assert isinstance(outcome, Completed), outcome
    assert outcome.output == {"trips": [], "limit": 2}
    text = await call(host, "trips.search", b'{"limit": 3.0}')
    assert isinstance(text, Completed) and text.output == {"trips": [], "limit": 3}
    # Still no integer: a fraction, or a zero fraction out of the field's range.
    for refused in ({"limit": 2.5}, {"limit": 60.0}):
        outcome = await call(host, "trips.search", refused)
        assert isinstance(outcome, Failed) and outcome.code == ErrorCode.INVALID_INPUT


async def test_raw_json_text_is_validated_as_strictly(host: Host) -> None:
    outcome = await call(host, "trips.search", b'{"limit": "2"}')
    assert isinstance(outcome, Failed) and outcome.code == ErrorCode.INVALID_INPUT
    assert outcome.meta is not None
    assert outcome.meta["issues"] == [
        {"loc": ["limit"], "msg": "Input should be a valid integer", "type": "int_type"}
    ]


async def test_a_model_that_says_strict_false_keeps_lax_coercion(host: Host) -> None:
    outcome = await call(host, "trips.search_lax", {"limit": "7"})
    assert isinstance(outcome, Completed), outcome
    assert isinstance(outcome.output, dict)
    assert outcome.output["limit"] == 7


async def test_a_lax_field_coerces_while_the_rest_of_the_tool_stays_strict(host: Host) -> None:
    outcome = await call(host, "trips.page", {"limit": 3, "page": "2"})
    assert isinstance(outcome, Completed), outcome
    assert isinstance(outcome.output, dict)
    assert outcome.output["limit"] == 302
    strict = await call(host, "trips.page", {"limit": "3", "page": 2})
    assert isinstance(strict, Failed) and strict.code == ErrorCode.INVALID_INPUT
    hopeless = await call(host, "trips.page", {"page": "two"})
    assert isinstance(hopeless, Failed) and hopeless.code == ErrorCode.INVALID_INPUT


async def test_python_callers_may_pass_python_values_as_a_client_would_send_json() -> None:
    registry = Registry()
    registry.register(search)
    outcome = await registry.dispatch(
        "trips.search",
        {"after": datetime(2026, 12, 1, tzinfo=UTC), "status": Status.PLANNED, "tags": ("a",)},
        ToolContext(tenant_id="acme"),
    )
    assert isinstance(outcome, Completed), outcome
