"""What the HTTP gate (``charter.mcp._gate.Body``) refuses before the SDK parses a body.

The whole app (``create_app``: REST and ``/mcp``) under uvicorn on 127.0.0.1, raw HTTP
requests, in both protocol eras: a request whose ``id`` is not a string or an integer is
a JSON-RPC ``-32600`` (never taken for a notification), and a body the parsers cannot
take for its size or depth is the problem REST answers for the same arguments.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from mcp_support import Probe, build_host
from tests.builders import MCP_HEADERS, MCP_INITIALIZE

from charter.http import create_app
from live_server import serve

MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Served:
    """The live app, its probe, and the headers of a request on an open handshake session."""

    def __init__(self, base: str, probe: Probe, http: httpx.Client) -> None:
        self.base = base
        self.probe = probe
        self.http = http
        opened = http.post(base + "/mcp", json=MCP_INITIALIZE, headers=MCP_HEADERS)
        assert opened.status_code == 200, opened.text
        self.legacy = {
            **MCP_HEADERS,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(base + "/mcp", json=done, headers=self.legacy).status_code == 202

    def post(self, era: str, body: bytes) -> httpx.Response:
        if era == "legacy":
            headers = self.legacy
        else:
            headers = {
                **MCP_HEADERS,
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": "tools/call",
                "Mcp-Name": "echo",
            }
        return self.http.post(self.base + "/mcp", content=body, headers=headers)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    probe = Probe()
    app = create_app(build_host(probe, authenticated=False), console=False)
    with serve(app) as base, httpx.Client(timeout=30) as http:
        yield Served(base, probe, http)


ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])


def _call(era: str, request_id: str, arguments: str = '{"text":"hi"}') -> bytes:
    """A raw ``tools/call`` of ``echo``: the id and the arguments as JSON text, kept as sent."""
    meta = ""
    if era == "modern":
        meta = ',"_meta":' + json.dumps(MODERN_META)
    head = '{"jsonrpc":"2.0","id":' + request_id + ',"method":"tools/call",'
    return (head + '"params":{"name":"echo","arguments":' + arguments + meta + "}}").encode()


@ERAS
@pytest.mark.parametrize("request_id", ["null", "1.5", "true", '{"a":1}', "[1]"])
def test_a_request_with_an_invalid_id_is_refused_not_swallowed(
    served: Served, era: str, request_id: str
) -> None:
    runs = served.probe.runs.get("echo", 0)
    answer = served.post(era, _call(era, request_id))
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["id"] is None and error["error"]["code"] == -32600
    assert served.probe.runs.get("echo", 0) == runs  # the tool did not run


@ERAS
def test_a_request_with_a_string_or_integer_id_still_runs(served: Served, era: str) -> None:
    for request_id in ('"a-1"', "7", "-3"):
        answer = served.post(era, _call(era, request_id))
        assert answer.status_code == 200, answer.text
        assert '"hi"' in answer.text


DEEP = "[" * 1000 + "]" * 1000
CASES = {
    "an integer of 4,301 digits": ('{"text":' + "9" * 4301 + "}", 413, "input_too_large"),
    "nesting 1,000 deep": ('{"text":' + DEEP + "}", 422, "input_too_deep"),
}


@ERAS
@pytest.mark.parametrize("case", list(CASES))
def test_a_body_past_the_parsers_limits_gets_the_problem_rest_gives(
    served: Served, era: str, case: str
) -> None:
    arguments, status, reason = CASES[case]
    rest = served.http.post(
        served.base + "/v1/tools/echo:call",
        content=arguments.encode(),
        headers={"Content-Type": "application/json"},
    )
    mcp = served.post(era, _call(era, "9", arguments))
    assert (rest.status_code, rest.json()["reason"]) == (status, reason)
    assert mcp.status_code == status, mcp.text
    assert mcp.headers["content-type"] == "application/problem+json"
    problem = mcp.json()
    assert (problem["code"], problem["reason"]) == ("INVALID_INPUT", reason)
