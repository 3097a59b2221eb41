"""Budgets over REST (issue #23): ``GET /v1/limits`` shows each caller what it may see."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from http_support import Lab, Live, build_host, serve

from charter import RateLimit
from charter.http import create_app

SEARCH = "/v1/tools/trips.search:call"
NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)
"""The host's clock stands still: a budget's use drains with time (50 a minute frees a unit
every 1.2 s), and a loaded machine can take that long between the calls and the reading."""


@pytest.fixture(scope="module")
def limited() -> Iterator[Live]:
    lab = Lab()
    host = build_host(
        lab,
        clock=lambda: NOW,
        rate_limits=[
            RateLimit(calls=5, per=60, name="calls per agent"),
            RateLimit(calls=50, per=60, key="tenant", name="calls per tenant"),
        ],
    )
    with serve(create_app(host, mcp=False)) as url:
        live = Live(url=url, host=host, lab=lab)
        with live.client("agent-token") as agent, live.client("approver-token") as approver:
            for _ in range(3):
                assert agent.post(SEARCH, json={"query": "lisbon"}).status_code == 200
            assert approver.post(SEARCH, json={"query": "porto"}).status_code == 200
        yield live


def budgets(live: Live, token: str, **params: str) -> tuple[int, dict[str, tuple[str, int]]]:
    with live.client(token) as client:
        response = client.get("/v1/limits", params=params)
    if response.status_code != 200:
        return response.status_code, {}
    body = response.json()
    return 200, {b["holder"]: (b["limit"], b["used"]) for b in body["budgets"]}


def test_an_agent_sees_its_own_budget_and_its_tenants(limited: Live) -> None:
    assert budgets(limited, "agent-token") == (
        200,
        {"acme/agent-7": ("calls per agent", 3), "tenant:acme": ("calls per tenant", 4)},
    )


def test_an_approver_sees_every_budget_of_the_tenant(limited: Live) -> None:
    status, seen = budgets(limited, "approver-token")
    assert status == 200
    assert seen == {
        "acme/agent-7": ("calls per agent", 3),
        "acme/ana": ("calls per agent", 1),
        "tenant:acme": ("calls per tenant", 4),
    }


def test_another_tenant_sees_nothing_of_acme_and_may_not_ask_for_it(limited: Live) -> None:
    assert budgets(limited, "globex-token") == (200, {})
    assert budgets(limited, "globex-token", tenant="acme")[0] == 403


def test_the_admin_may_read_another_tenants_budgets(limited: Live) -> None:
    status, seen = budgets(limited, "admin-token", tenant="acme")
    assert status == 200 and seen["acme/agent-7"] == ("calls per agent", 3)


def test_without_credentials_the_budgets_are_401(limited: Live) -> None:
    with limited.client() as anonymous:
        assert anonymous.get("/v1/limits").status_code == 401
