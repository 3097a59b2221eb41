"""Cross-site requests: one ``Origin`` policy for every door, and REST bodies that are JSON.

A page on any site can make its visitor's browser POST to a charter server on 127.0.0.1
without a CORS preflight, if the request has no custom header and a ``text/plain`` (or
form) body; the ``requestId`` of a ledgered write can travel in the body's ``_charter``.
REST used to run such a call while ``/mcp`` refused the same ``Origin``. Now a present
``Origin`` outside ``allowed_origins`` is 403 on every route, and a body not declared JSON
is 415.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from http_support import Lab, Live, assert_problem, build_host, serve
from tests.builders import MCP_HEADERS, MCP_INITIALIZE
from tests.builders import request_id as key

from charter.http import create_app

RENAME = "/v1/tools/trips.rename:call"
PING = "/v1/tools/catalog.ping:call"
EVIL = "https://evil.example"


# -- Origin ---------------------------------------------------------------------------------


def test_a_cross_site_simple_request_is_403_and_runs_nothing(live: Live) -> None:
    body = b'{"trip_id": "trp_csrf", "name": "Evil", "_charter": {"requestId": "%s"}}' % (
        key().encode()
    )
    with live.client("agent-token") as client:
        forged = client.post(
            RENAME, content=body, headers={"Origin": EVIL, "Content-Type": "text/plain"}
        )
        forged_json = client.post(
            RENAME, content=body, headers={"Origin": EVIL, "Content-Type": "application/json"}
        )
    with live.client() as anonymous:
        public = anonymous.post(PING, headers={"Origin": EVIL, "Content-Type": "text/plain"})
        listed = anonymous.get("/v1/tools", headers={"Origin": EVIL})
    for refused in (forged, forged_json, public, listed):
        problem = assert_problem(
            refused, 403, code="INVALID_INPUT", reason="origin_not_allowed", retryable=False
        )
        assert "Origin" in problem["detail"]
    assert live.lab.runs["rename:trp_csrf"] == 0


@pytest.mark.parametrize("origin", ["null", "http://127.0.0.1.evil.example", "file://"])
def test_look_alike_and_opaque_origins_are_403(live: Live, origin: str) -> None:
    with live.client() as anonymous:
        response = anonymous.post(PING, json={}, headers={"Origin": origin})
    assert_problem(response, 403, reason="origin_not_allowed")


def test_the_servers_own_origin_is_allowed_and_no_origin_passes(live: Live) -> None:
    port = httpx.URL(live.url).port
    with live.client("agent-token") as client:
        for origin in (f"http://127.0.0.1:{port}", f"https://127.0.0.1:{port}"):
            response = client.post(
                RENAME,
                json={"trip_id": "trp_same", "name": "Same"},
                headers={"Origin": origin, "Idempotency-Key": key()},
            )
            assert response.status_code == 200, response.text
        by_name = client.get(
            "/v1/whoami",
            headers={"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
        )
        without = client.get("/v1/whoami")
    assert (by_name.status_code, without.status_code) == (200, 200)


def test_two_origin_headers_are_403(live: Live) -> None:
    port = httpx.URL(live.url).port
    with live.client() as anonymous:
        response = anonymous.post(
            PING,
            json={},
            headers=[("Origin", f"http://127.0.0.1:{port}"), ("Origin", EVIL)],
        )
    assert_problem(response, 403, reason="origin_not_allowed")


def test_probes_answer_any_origin(live: Live) -> None:
    with live.client() as anonymous:
        assert anonymous.get("/healthz", headers={"Origin": EVIL}).status_code == 200
        assert anonymous.get("/readyz", headers={"Origin": EVIL}).status_code == 200


def test_rest_and_mcp_refuse_a_foreign_origin_with_the_same_problem(both: Live) -> None:
    headers = {"Authorization": "Bearer agent-token", "Origin": EVIL}
    with httpx.Client(base_url=both.url, timeout=10) as client:
        rest = client.post("/v1/tools/trips.search:call", json={"query": "lisbon"}, headers=headers)
        mcp = client.post("/mcp", json=MCP_INITIALIZE, headers={**MCP_HEADERS, **headers})
        port = httpx.URL(both.url).port
        own = client.post(
            "/mcp",
            json=MCP_INITIALIZE,
            headers={**MCP_HEADERS, **headers, "Origin": f"http://127.0.0.1:{port}"},
        )
    assert_problem(rest, 403, reason="origin_not_allowed")
    assert_problem(mcp, 403, reason="origin_not_allowed")
    assert rest.json() == mcp.json()
    assert own.status_code == 200


@pytest.fixture(scope="module")
def configured() -> Iterator[Live]:
    """Origins given: one allowed outright, one for CORS; the hosts' own forms replaced."""
    lab = Lab()
    host = build_host(lab)
    app = create_app(
        host,
        allowed_origins=["https://app.example", "http://127.0.0.1:*"],
        cors_origins=["https://ops.example"],
    )
    with serve(app) as url:
        yield Live(url=url, host=host, lab=lab)


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("https://app.example", 200),
        ("https://ops.example", 200),
        ("http://127.0.0.1:8700", 200),
        ("https://127.0.0.1:8700", 403),  # not listed: allowed_origins replaces the default
        ("https://app.example:8443", 403),
        (EVIL, 403),
    ],
)
def test_allowed_origins_and_cors_origins_are_the_allowed_ones_on_rest_and_mcp(
    configured: Live, origin: str, status: int
) -> None:
    headers = {"Authorization": "Bearer agent-token", "Origin": origin}
    with httpx.Client(base_url=configured.url, timeout=10) as client:
        rest = client.post(PING, json={}, headers=headers)
        mcp = client.post("/mcp", json=MCP_INITIALIZE, headers={**MCP_HEADERS, **headers})
    assert (rest.status_code, mcp.status_code) == (status, status), (rest.text, mcp.text)


# -- Content-Type -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        "text/json",
        None,
    ],
)
def test_a_call_whose_body_is_not_declared_json_is_415_and_runs_nothing(
    live: Live, content_type: str | None
) -> None:
    request_id = key()
    body = b'{"trip_id": "trp_media", "name": "Plain", "_charter": {"requestId": "%s"}}' % (
        request_id.encode()
    )
    headers = {"Content-Type": content_type} if content_type is not None else {}
    with live.client("agent-token") as client:
        response = client.post(RENAME, content=body, headers=headers)
        status = client.get(f"/v1/actions/{request_id}")
    problem = assert_problem(
        response,
        415,
        code="INVALID_INPUT",
        reason="unsupported_media_type",
        meta={"accepted": "application/json"},
    )
    assert "application/json" in problem["detail"]
    assert status.status_code == 404  # nothing ran, nothing was recorded
    assert live.lab.runs["rename:trp_media"] == 0


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;Charset=UTF-8",
        "application/vnd.acme+json",
    ],
)
def test_json_media_types_are_accepted(agent: httpx.Client, content_type: str) -> None:
    response = agent.post(
        RENAME,
        content=b'{"trip_id": "trp_json", "name": "Json"}',
        headers={"Content-Type": content_type, "Idempotency-Key": key()},
    )
    assert response.status_code == 200, response.text


def test_an_empty_body_needs_no_content_type(anonymous: httpx.Client) -> None:
    assert anonymous.post(PING).status_code == 200
    assert anonymous.post(PING, headers={"Content-Type": "text/plain"}).status_code == 415


def test_two_content_types_are_415(agent: httpx.Client) -> None:
    response = agent.post(
        RENAME,
        content=b'{"trip_id": "trp_two", "name": "Two"}',
        headers=[
            ("Content-Type", "application/json"),
            ("Content-Type", "text/plain"),
            ("Idempotency-Key", key()),
        ],
    )
    assert_problem(response, 415, reason="unsupported_media_type")


def test_approval_decisions_and_prompts_take_json_bodies_only(
    approver: httpx.Client, anonymous: httpx.Client
) -> None:
    plain = {"Content-Type": "text/plain"}
    for path in ("/v1/approvals/apr_x:grant", "/v1/approvals/apr_x:deny"):
        refused = approver.post(path, content=b'{"reason": "ok"}', headers=plain)
        assert_problem(refused, 415, reason="unsupported_media_type")
        # Declared JSON, it goes on to the lookup.
        assert approver.post(path, json={"reason": "ok"}).status_code == 404
    prompt = anonymous.post("/v1/prompts/summary:get", content=b"{}", headers=plain)
    assert_problem(prompt, 415, reason="unsupported_media_type")


def test_the_caller_is_checked_before_the_content_type(anonymous: httpx.Client) -> None:
    # The body would not be read: the host's own refusal comes first, as before.
    refused = anonymous.post(RENAME, content=b"{}", headers={"Content-Type": "text/plain"})
    assert refused.status_code == 401
    grant = anonymous.post(
        "/v1/approvals/apr_x:grant", content=b"{}", headers={"Content-Type": "text/plain"}
    )
    assert grant.status_code == 401


def test_the_openapi_document_lists_the_415_of_the_routes_that_take_a_body(
    agent: httpx.Client,
) -> None:
    document = agent.get("/v1/openapi.json").json()
    paths = document["paths"]
    for path in (
        "/v1/tools/trips.rename:call",
        "/v1/approvals/{approval_id}:grant",
        "/v1/approvals/{approval_id}:deny",
        "/v1/prompts/{name}:get",
    ):
        operation = paths[path]["post"]
        assert "application/json" in operation["requestBody"]["content"], path
        assert operation["responses"]["415"] == {"$ref": "#/components/responses/Problem415"}
    assert "Content-Type" in document["components"]["responses"]["Problem415"]["description"]
