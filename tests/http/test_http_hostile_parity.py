"""REST and MCP refuse hostile input alike: Host header, body size, duplicate JSON keys.

One policy (``charter._asgi``) wraps both doors of ``create_app`` and the standalone MCP
app (``charter.mcp.create_asgi_app``); each case is sent to every door of a real server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from http_support import Lab, build_host, serve

from charter.http import create_app
from charter.mcp import create_asgi_app

AGENT = {"Authorization": "Bearer agent-token"}
MCP_HEADERS = {
    **AGENT,
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-06-18",
}
ONE_MIB = 1024 * 1024


@pytest.fixture(scope="module")
def combined() -> Iterator[str]:
    with serve(create_app(build_host(Lab()))) as url:
        yield url


@pytest.fixture(scope="module")
def standalone() -> Iterator[str]:
    with serve(create_asgi_app(build_host(Lab()))) as url:
        yield url


def rest(url: str, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/tools/trips.search:call",
        content=body,
        headers={**AGENT, "Content-Type": "application/json", **headers},
        timeout=30,
    )


def mcp(url: str, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(f"{url}/mcp", content=body, headers={**MCP_HEADERS, **headers}, timeout=30)


def call_body(arguments: str) -> bytes:
    return (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
        f'"params": {{"name": "trips.search", "arguments": {arguments}}}}}'
    ).encode()


def problem_of(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("door", ["rest", "mcp", "standalone-mcp"])
def test_a_foreign_host_header_is_refused_421_on_every_door(
    combined: str, standalone: str, door: str
) -> None:
    # DNS rebinding: an attacker's name pointed at 127.0.0.1, called from a browser.
    headers = {"Host": "evil.example:8700"}
    if door == "rest":
        answer = rest(combined, b'{"query": "lisbon"}', **headers)
    else:
        answer = mcp(combined if door == "mcp" else standalone, call_body("{}"), **headers)
    assert answer.status_code == 421
    assert problem_of(answer)["reason"] == "host_not_allowed"


def test_the_console_and_openapi_refuse_a_foreign_host_but_probes_answer(combined: str) -> None:
    evil = {"Host": "evil.example"}
    assert httpx.get(f"{combined}/v1/openapi.json", headers=evil).status_code == 421
    assert httpx.get(f"{combined}/console/", headers=evil).status_code == 421
    # An orchestrator probes the replica by its own address.
    assert httpx.get(f"{combined}/healthz", headers={"Host": "10.1.2.3:8700"}).status_code == 200
    assert httpx.get(f"{combined}/v1/openapi.json", headers={"Host": "localhost"}).is_success


def test_allowed_hosts_let_a_named_host_reach_rest_and_mcp() -> None:
    app = create_app(build_host(Lab()), allowed_hosts=["tools.example.com", "127.0.0.1:*"])
    with serve(app) as url:
        named = {"Host": "tools.example.com"}
        assert rest(url, b'{"query": "lisbon"}', **named).status_code == 200
        assert rest(url, b'{"query": "lisbon"}', Host="tools.example.com:9000").status_code == 421


@pytest.mark.parametrize("door", ["rest", "mcp", "standalone-mcp"])
def test_a_body_over_one_mib_is_refused_413_on_every_door(
    combined: str, standalone: str, door: str
) -> None:
    padding = "x" * ONE_MIB
    if door == "rest":
        answer = rest(combined, f'{{"query": "{padding}"}}'.encode())
    else:
        body = call_body(f'{{"query": "{padding}"}}')
        answer = mcp(combined if door == "mcp" else standalone, body)
    assert answer.status_code == 413
    assert problem_of(answer)["reason"] == "input_too_large"


@pytest.mark.parametrize("door", ["mcp", "standalone-mcp"])
def test_a_streamed_mcp_body_is_cut_off_at_the_limit(
    combined: str, standalone: str, door: str
) -> None:
    # Chunked, so no declared length: refused as the body passes 1 MiB, not read in full.
    def chunks() -> Iterator[bytes]:
        yield call_body('"__"').split(b'"__"')[0] + b'{"query": "'
        for _ in range(1100):
            yield b"x" * 1024
        yield b'"}}}'

    url = combined if door == "mcp" else standalone
    answer = httpx.post(f"{url}/mcp", content=chunks(), headers=MCP_HEADERS, timeout=30)
    assert answer.status_code == 413
    assert problem_of(answer)["reason"] == "input_too_large"
    assert answer.headers["connection"] == "close"


@pytest.mark.parametrize("door", ["rest", "mcp", "standalone-mcp"])
def test_duplicate_json_keys_are_refused_on_every_door(
    combined: str, standalone: str, door: str
) -> None:
    # Two values for one field: a check could read one while the tool runs with the other.
    arguments = '{"query": "globex", "query": "lisbon"}'
    if door == "rest":
        answer = rest(combined, arguments.encode())
    else:
        answer = mcp(combined if door == "mcp" else standalone, call_body(arguments))
    assert answer.status_code in (400, 422), answer.text
    body = problem_of(answer)
    assert body["code"] == "INVALID_INPUT"
    assert body["reason"] == "duplicate_key"


def test_a_duplicate_key_in_the_json_rpc_envelope_is_refused_too(combined: str) -> None:
    body = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "method": "tools/list", '
        b'"params": {"name": "trips.search", "arguments": {"query": "lisbon"}}}'
    )
    answer = mcp(combined, body)
    assert answer.status_code == 400
    assert problem_of(answer)["reason"] == "duplicate_key"


@pytest.mark.parametrize(
    "arguments",
    [
        # The same key written two ways: keys are compared as decoded.
        '{"query": "globex", "\\u0071uery": "lisbon"}',
        # A lone surrogate, which jiter refuses and the standard library's parser (and
        # so the second check) takes: still refused.
        '{"\\ud800": "globex", "\\ud800": "lisbon"}',
    ],
)
def test_a_duplicate_key_written_with_escapes_is_refused_over_mcp(
    combined: str, arguments: str
) -> None:
    answer = mcp(combined, call_body(arguments))
    assert answer.status_code == 400, answer.text
    assert problem_of(answer)["reason"] == "duplicate_key"


def test_mcp_without_credentials_is_answered_before_its_body_is_checked(combined: str) -> None:
    # The body is read only once the caller is known, as on REST.
    headers = {k: v for k, v in MCP_HEADERS.items() if k != "Authorization"}
    answer = httpx.post(
        f"{combined}/mcp", content=call_body('{"query": 1, "query": 2}'), headers=headers
    )
    assert answer.status_code == 401
