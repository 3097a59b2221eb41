"""Routing: a wrong method is a 405 whose ``Allow`` lists what the path really accepts."""

from __future__ import annotations

import httpx
import pytest
from http_support import PROBLEM, Lab, build_host, serve

from charter.http import create_app

POST_ONLY = [
    "/v1/tools/catalog.ping:call",
    "/v1/tools/trips.search:call",
    "/v1/approvals/apr_0123456789abcdef:grant",
    "/v1/approvals/apr_0123456789abcdef:deny",
]
GET_ONLY = [
    "/v1/tools",
    "/v1/tools/catalog.ping",
    "/v1/approvals",
    "/v1/approvals/apr_0123456789abcdef",
    "/v1/actions/0b7f2c52-3d4e-4d33-9f1c-1f4a3a0e7a10",
    "/v1/effects/eff_0123456789abcdef",
    "/v1/whoami",
]


def allowed(response: httpx.Response) -> set[str]:
    return {method.strip() for method in response.headers["allow"].split(",")}


@pytest.mark.parametrize("path", POST_ONLY)
@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_a_post_only_path_answers_other_methods_with_405_allow_post(
    agent: httpx.Client, path: str, method: str
) -> None:
    response = agent.request(method, path)
    assert response.status_code == 405
    assert allowed(response) == {"POST"}
    if method != "HEAD":
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["detail"] == f"{method} is not supported here."


@pytest.mark.parametrize("path", GET_ONLY)
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_a_get_only_path_answers_other_methods_with_405_allow_get_and_head(
    agent: httpx.Client, path: str, method: str
) -> None:
    response = agent.request(method, path)
    assert response.status_code == 405
    assert allowed(response) == {"GET", "HEAD"}


def test_the_routes_still_serve_their_own_methods(agent: httpx.Client) -> None:
    assert agent.get("/v1/tools/catalog.ping").status_code == 200
    assert agent.post("/v1/tools/catalog.ping:call", json={}).status_code == 200
    # A name with a colon is no tool and no path: an unknown route, not a tool lookup.
    unknown = agent.get("/v1/tools/catalog.ping:list")
    assert unknown.status_code == 404
    assert unknown.json()["reason"] == "route_not_found"


def test_the_mcp_endpoint_answers_other_methods_with_405_and_rest_paths_are_unchanged() -> None:
    # /mcp is matched before the REST routes (an MCP request skips them): a method it
    # does not take is still its own 405, and the REST routes answer as before.
    with serve(create_app(build_host(Lab()))) as url:
        with httpx.Client(base_url=url, headers={"Authorization": "Bearer agent-token"}) as c:
            response = c.request("PUT", "/mcp")
            assert response.status_code == 405
            assert allowed(response) == {"GET", "HEAD", "POST", "DELETE"}
            assert c.get("/v1/tools").status_code == 200
            assert c.request("PUT", "/v1/tools/catalog.ping:call").status_code == 405


def test_the_call_route_matches_exactly_what_the_route_pattern_does() -> None:
    from starlette.routing import Match, Route

    from charter.http.app import _CallRoute

    async def endpoint(scope: object, receive: object, send: object) -> None: ...

    fast = _CallRoute("/v1/tools/{name}:call", endpoint, methods=["POST"])
    plain = Route("/v1/tools/{name}:call", endpoint, methods=["POST"])
    paths = [
        *("/v1/tools/add:call", "/v1/tools/:call", "/v1/tools/a/b:call", "/v1/tools/a:b:call"),
        *("/v1/tools/add:call/", "/v1/tools/add", "/v1/tools/add:callx", "/v1/toolsx/a:call"),
        *("/v1/tools/add:call\n", "/v1/tools/ad d:call", "/api/v1/tools/add:call"),
    ]
    for path in paths:
        for method in ("POST", "GET"):
            for root_path in ("", "/api"):
                scope = {"type": "http", "path": path, "method": method, "root_path": root_path}
                match, child = plain.matches(scope)
                params = child.get("path_params", {})
                if any(":" in value for value in params.values()):
                    match, child = Match.NONE, {}
                got, got_child = fast.matches(scope)
                assert (got, got_child.get("path_params")) == (match, child.get("path_params"))
