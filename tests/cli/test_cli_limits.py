"""Budgets on a real `charter serve` (issue #23): REST 429s with the IETF fields, MCP
error results that say when to retry, `charter limits`, and two stateless replicas on
PostgreSQL sharing one budget exactly."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_support import charter, create_key, sqlite
from tests.builders import mcp_http_client
from tests.store.conftest import postgres_schema, require_postgres

from live_server import charter_serve

TARGET = '''
from pydantic import BaseModel

from charter import RateLimit, Registry, RiskPolicy, tool


class Search(BaseModel):
    destination: str


class Trips(BaseModel):
    found: list[str]


@tool(
    tier="read",
    name="trips.search",
    required_scopes=["trips:read"],
    limits=[RateLimit(calls=10, per=600)],
)
def search(args: Search) -> Trips:
    """Search trips to a destination."""
    return Trips(found=[args.destination + " in May"])


@tool(
    tier="write",
    name="trips.book",
    required_scopes=["trips:read"],
    risk_policy=RiskPolicy(destructive=False, reversible=True, dry_run_supported=False),
    limits=[RateLimit(calls=10, per=600)],
)
def book(args: Search) -> Trips:
    """Book a trip (ledgered: its transaction spends its budget)."""
    return Trips(found=[args.destination + " booked"])


registry = Registry()
registry.register_all([search, book])
'''

# One call back every 60 s: 64 calls finish long before, however loaded the machine.
POLICY = '"10/600s by principal"'
SEARCH = "/v1/tools/trips.search:call"
BOOK = "/v1/tools/trips.book:call"


@pytest.fixture
def target(write_target: Callable[[str], str]) -> str:
    return f"{write_target(TARGET)}:registry"


RETRIES = 20
"""Tries of a call answered 503 (``call_concurrently``)."""


async def call_concurrently(
    urls: list[str], key: str, calls: int, path: str = SEARCH
) -> list[httpx.Response]:
    """``calls`` REST calls at once, spread over ``urls`` in turn (each its own request id).

    A call answered 503 is retried with its request id, as a client does with a retryable
    answer: on a loaded machine a budget's spend can wait past the store's busy timeout
    (PROVIDER_UNAVAILABLE, nothing spent, nothing run). The answers returned are the final ones.
    """
    headers = {"Authorization": f"Bearer {key}"}

    async def call(http: httpx.AsyncClient, i: int) -> httpx.Response:
        body = {"destination": f"d{i}", "_charter": {"requestId": str(uuid.uuid4())}}
        for _ in range(RETRIES):
            response = await http.post(urls[i % len(urls)] + path, json=body)
            if response.status_code != 503:
                break
            await asyncio.sleep(0.1)
        return response

    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        return await asyncio.gather(*(call(http, i) for i in range(calls)))


async def call_over_mcp(url: str, key: str) -> tuple[bool, dict[str, Any]]:
    async with mcp_http_client(url + "/mcp", key) as client:
        result = await client.call_tool("trips.search", {"destination": "Porto"})
    return bool(result.is_error), dict((result.meta or {}).get("charter/error") or {})


def test_64_concurrent_rest_calls_run_10_and_refuse_54_with_the_rate_limit_fields(
    target: str, tmp_path: Path
) -> None:
    db = sqlite(tmp_path / "limits.db")
    planner = create_key(db, "acme", "planner", "trips:read")
    planner_at_globex = create_key(db, "globex", "planner", "trips:read")
    with charter_serve(target, "--db", db, cwd=tmp_path) as served:
        responses = asyncio.run(call_concurrently([served.url], planner, 64))
        mcp_error, mcp_meta = asyncio.run(call_over_mcp(served.url, planner))
        # The same subject in another tenant has a budget of its own.
        elsewhere = asyncio.run(call_concurrently([served.url], planner_at_globex, 1))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 10 + [429] * 54
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["retry-after"] == "60"
    assert refused.headers["ratelimit"] == f"{POLICY};r=0;t=60"
    assert refused.headers["ratelimit-policy"] == f"{POLICY};q=10;w=600"
    problem = refused.json()
    assert problem["code"] == "RATE_LIMITED" and problem["retryable"] is True
    assert 59 < problem["meta"]["retryAfter"] <= 60 and problem["next_steps"]
    assert mcp_error and mcp_meta["resolution"] == "retry" and mcp_meta["retryAfter"] > 0
    assert [r.status_code for r in elsewhere] == [200]

    shown = charter("limits", "--db", db, "--json")
    assert shown.exit_code == 0, shown.output
    usage = {row["holder"]: row for row in json.loads(shown.stdout)}
    assert usage["acme/planner"]["used"] == 10
    assert usage["acme/planner"]["capacity"] == 10
    assert usage["acme/planner"]["tool"] == "trips.search"
    assert usage["globex/planner"]["used"] == 1
    only_acme = json.loads(charter("limits", "--db", db, "--tenant", "acme", "--json").stdout)
    assert [row["holder"] for row in only_acme] == ["acme/planner"]
    table = charter("limits", "--db", db)
    assert "10/10" in table.stdout and "acme/planner" in table.stdout
    # Pruning keeps a budget still being spent.
    assert charter("db", "prune", "--db", db).exit_code == 0
    assert len(json.loads(charter("limits", "--db", db, "--json").stdout)) == 2


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("path", "tool"), [(SEARCH, "trips.search"), (BOOK, "trips.book")], ids=["read", "ledgered"]
)
def test_two_stateless_replicas_on_postgresql_share_one_budget_exactly(
    target: str, tmp_path: Path, path: str, tool: str
) -> None:
    require_postgres()
    with postgres_schema() as db, ExitStack() as replicas:
        planner = create_key(db, "acme", "planner", "trips:read")
        urls = [
            replicas.enter_context(
                charter_serve(target, "--db", db, "--stateless", cwd=tmp_path)
            ).url
            for _ in range(2)
        ]
        responses = asyncio.run(call_concurrently(urls, planner, 64, path))
        shown = json.loads(charter("limits", "--db", db, "--json").stdout)
    served_by = {
        url: [r.status_code for r in responses if str(r.url).startswith(url)] for url in urls
    }
    assert all(len(statuses) == 32 for statuses in served_by.values())
    assert sorted(r.status_code for r in responses) == [200] * 10 + [429] * 54
    assert [(row["tool"], row["holder"], row["used"]) for row in shown] == [
        (tool, "acme/planner", 10)
    ]
