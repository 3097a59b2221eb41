"""Ambiguous credentials: two of them on one request are a 400 on REST and on MCP.

Taking the first of two ``Authorization`` headers (or two ``X-API-Key``, or a bearer token
and a different API key) would let the other go unseen; both transports refuse such a
request before any authenticator runs, with the same problem.
"""

from __future__ import annotations

import httpx
import pytest
from http_support import Live, assert_problem
from tests.builders import MCP_HEADERS, MCP_INITIALIZE

AMBIGUOUS = {
    "two Authorization headers": [
        ("Authorization", "Bearer agent-token"),
        ("Authorization", "Bearer approver-token"),
    ],
    "the same Authorization header twice": [
        ("Authorization", "Bearer agent-token"),
        ("Authorization", "Bearer agent-token"),
    ],
    "a bearer token and a Basic header": [
        ("Authorization", "Bearer agent-token"),
        ("Authorization", "Basic YWdlbnQ6c2VjcmV0"),
    ],
    "two X-API-Key headers": [("X-API-Key", "agent-token"), ("X-API-Key", "approver-token")],
    "a bearer token and a different API key": [
        ("Authorization", "Bearer agent-token"),
        ("X-API-Key", "approver-token"),
    ],
}


def assert_ambiguous(response: httpx.Response) -> None:
    problem = assert_problem(
        response, 400, status=400, code="INVALID_INPUT", reason="ambiguous_credentials"
    )
    assert problem["next_steps"] and "one credential" in problem["next_steps"][0].lower()
    assert "agent-token" not in response.text and "approver-token" not in response.text


@pytest.mark.parametrize("headers", list(AMBIGUOUS.values()), ids=list(AMBIGUOUS))
def test_ambiguous_credentials_are_a_400_over_rest_and_nothing_runs(
    both: Live, headers: list[tuple[str, str]]
) -> None:
    with httpx.Client(base_url=both.url, timeout=10) as http:
        call = http.post(
            "/v1/tools/trips.rename:call",
            json={"trip_id": "trp_amb", "name": "Porto"},
            headers=[*headers, ("Idempotency-Key", "5d0e8a43-6a1e-4c0f-9a55-0e4c2b8f1d11")],
        )
        whoami = http.get("/v1/whoami", headers=headers)
    assert_ambiguous(call)
    assert_ambiguous(whoami)
    assert both.lab.runs["rename:trp_amb"] == 0


@pytest.mark.parametrize("headers", list(AMBIGUOUS.values()), ids=list(AMBIGUOUS))
def test_ambiguous_credentials_are_a_400_over_mcp_before_a_session_starts(
    both: Live, headers: list[tuple[str, str]]
) -> None:
    with httpx.Client(base_url=both.url, timeout=10) as http:
        response = http.post("/mcp", json=MCP_INITIALIZE, headers=[*MCP_HEADERS.items(), *headers])
    assert_ambiguous(response)
    assert "mcp-session-id" not in response.headers


def test_one_credential_still_works_on_both(both: Live) -> None:
    with httpx.Client(base_url=both.url, timeout=10) as http:
        by_bearer = http.get("/v1/whoami", headers={"Authorization": "Bearer agent-token"})
        by_key = http.get("/v1/whoami", headers={"X-API-Key": "agent-token"})
        mcp = http.post(
            "/mcp",
            json=MCP_INITIALIZE,
            headers={**MCP_HEADERS, "Authorization": "Bearer agent-token"},
        )
    assert by_bearer.status_code == by_key.status_code == 200
    assert by_bearer.json()["subject"] == by_key.json()["subject"] == "agent-7"
    assert mcp.status_code == 200


def test_the_same_credential_as_bearer_and_api_key_is_left_to_the_authenticator(
    both: Live,
) -> None:
    # Not ambiguous; charter's own authenticators refuse "both" with 401 all the same.
    with httpx.Client(base_url=both.url, timeout=10) as http:
        response = http.get(
            "/v1/whoami",
            headers={"Authorization": "Bearer agent-token", "X-API-Key": "agent-token"},
        )
    assert response.status_code == 401
    assert response.json()["reason"] == "invalid_token"
