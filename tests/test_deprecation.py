from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from pydantic import BaseModel

from charter import Alias, Deprecation, Host, Principal, Registry, define_tool


class Query(BaseModel):
    text: str = ""


class Found(BaseModel):
    count: int


def search(args: Query) -> Found:
    return Found(count=len(args.text))


def _registry(sunset: date) -> Registry:
    registry = Registry()
    registry.register(
        define_tool(
            name="trips.search",
            description="Search trips.",
            input_schema=Query,
            output_schema=Found,
            handler=search,
            tier="read",
            aliases=[
                "trips.lookup",
                Alias(
                    name="trips.find",
                    deprecation=Deprecation(
                        since_version="1.0.0", message="Call trips.search.", sunset_date=sunset
                    ),
                ),
            ],
        )
    )
    return registry


CALLER = Principal(subject="ada", tenant_id="acme", scopes=frozenset())


def test_a_deprecated_alias_is_listed_with_its_deprecation_and_still_dispatches() -> None:
    registry = _registry(date(2027, 6, 30))
    entry = registry.list()[0]
    assert entry["aliases"] == ["trips.lookup", "trips.find"]
    assert entry["aliasDeprecations"] == {
        "trips.find": {
            "sinceVersion": "1.0.0",
            "message": "Call trips.search.",
            "sunsetDate": "2027-06-30",
        }
    }
    assert "deprecation" not in entry
    assert registry.get("trips.find") is registry.get("trips.search")


@pytest.mark.anyio
async def test_discovery_warns_once_an_aliases_sunset_date_has_passed() -> None:
    registry = _registry(date(2027, 6, 30))
    before = Host(registry, clock=lambda: datetime(2027, 6, 30, 12, tzinfo=UTC))
    assert "warnings" not in before.discover(CALLER)[0]
    after = Host(registry, clock=lambda: datetime(2027, 7, 1, tzinfo=UTC))
    (entry,) = after.discover(CALLER)
    assert entry["warnings"] == [
        "alias 'trips.find' of 'trips.search' is deprecated and past its sunset date "
        "2027-06-30 (Call trips.search.); remove it or move the date"
    ]
    # The registry's own entry is shared and never mutated by discovery.
    assert "warnings" not in registry.list()[0]
    outcome = await after.invoke("trips.find", {"text": "abc"}, CALLER)
    assert outcome.kind == "completed"
