"""Quiet 2026-07-28 requests: answered as one JSON body, a departed client still cancels.

A real server on 127.0.0.1 and raw HTTP, so the answer's media type, its events and the
moment the client leaves are the test's to see. The SDK's keep-alive interval is made
short in the server (it runs in this process), so that what the streaming mode does with
a silent call, and what a quiet request does instead, shows in a second.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import mcp.server._streamable_http_modern as modern
import pytest
from pydantic import BaseModel
from tests.builders import MCP_HEADERS

from charter import Registry, ToolContext, tool
from charter.host import Host
from charter.mcp import create_asgi_app
from charter.mcp._quiet import WATCH_AFTER
from live_server import serve

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
PING_SECONDS = 0.1
"""The SDK's keep-alive interval while these tests run (15 s in production)."""
NAP_SECONDS = 0.6
"""How long ``nap`` stays silent: several keep-alive intervals."""


class Empty(BaseModel):
    """No arguments."""


class Said(BaseModel):
    """What a tool answers."""

    text: str


@dataclass
class Probe:
    """What the tools saw, across the server's threads."""

    started: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)


def _host(probe: Probe) -> Host:
    @tool(tier="read", auth="public")
    async def nap(_: Empty) -> Said:
        """Stay silent for a while, then answer."""
        await anyio.sleep(NAP_SECONDS)
        return Said(text="rested")

    @tool(tier="read", auth="public")
    async def count_up(_: Empty, ctx: ToolContext) -> Said:
        """Report progress 1/2 and 2/2."""
        for step in (1, 2):
            await ctx.report_progress(step, 2)
        return Said(text="counted")

    @tool(tier="read", auth="public")
    async def chatty(_: Empty, ctx: ToolContext) -> Said:
        """Log once at info."""
        await ctx.log("info", "working")
        return Said(text="logged")

    @tool(tier="read", auth="public")
    def wait_for_cancel(_: Empty, ctx: ToolContext) -> Said:
        """A sync handler that blocks until its call is cancelled."""
        probe.started.set()
        if ctx.cancel.wait_sync(10):
            probe.cancelled.set()
        return Said(text="done")

    registry = Registry()
    registry.register_all([nap, count_up, chatty, wait_for_cancel])
    return Host(registry)


@dataclass
class Server:
    """A running server and its tools' probe."""

    mcp: str
    probe: Probe


def _serve(**options: Any) -> Iterator[Server]:
    probe = Probe()
    with serve(create_asgi_app(_host(probe), **options)) as url:
        yield Server(mcp=url + "/mcp", probe=probe)


@pytest.fixture(scope="module")
def quiet() -> Iterator[Server]:
    """The default: quiet requests answered as JSON."""
    yield from _serve(stateless=True)


@pytest.fixture(scope="module")
def streaming() -> Iterator[Server]:
    """``quiet_json=False``: the SDK's streaming mode for every request."""
    yield from _serve(stateless=True, quiet_json=False)


@pytest.fixture(autouse=True)
def short_pings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modern, "_SSE_PING_INTERVAL", PING_SECONDS)


def _call(name: str, **meta: Any) -> tuple[dict[str, str], dict[str, Any]]:
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": VERSION}
    headers.update({"Mcp-Method": "tools/call", "Mcp-Name": name})
    params = {
        "name": name,
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            **meta,
        },
    }
    return headers, {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body, in order."""
    return [
        json.loads(line[len("data:") :])
        for line in response.text.splitlines()
        if line.startswith("data:") and line[len("data:") :].strip()
    ]


async def test_a_silent_call_is_one_json_body_however_long_it_runs(quiet: Server) -> None:
    headers, body = _call("nap")
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(quiet.mcp, json=body, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    answer = response.json()
    assert answer["id"] == 7
    assert answer["result"]["structuredContent"] == {"text": "rested"}


async def test_without_quiet_json_a_silent_call_streams_with_keep_alive_pings(
    streaming: Server,
) -> None:
    headers, body = _call("nap")
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(streaming.mcp, json=body, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert ": ping" in response.text
    assert _events(response)[-1]["result"]["structuredContent"] == {"text": "rested"}


async def test_a_call_that_asks_for_progress_streams_it(quiet: Server) -> None:
    headers, body = _call("count_up", progressToken="p-1")
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(quiet.mcp, json=body, headers=headers)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response)
    progress = [e["params"] for e in events if e.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"]) for p in progress] == [("p-1", 1), ("p-1", 2)]
    assert events[-1]["result"]["structuredContent"] == {"text": "counted"}


async def test_a_call_that_asks_for_log_messages_streams_them(quiet: Server) -> None:
    headers, body = _call("chatty", **{"io.modelcontextprotocol/logLevel": "info"})
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(quiet.mcp, json=body, headers=headers)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response)
    logs = [e["params"] for e in events if e.get("method") == "notifications/message"]
    assert [(log["level"], log["data"]) for log in logs] == [("info", "working")]


async def test_progress_a_quiet_call_did_not_ask_for_is_not_sent(quiet: Server) -> None:
    headers, body = _call("count_up")
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(quiet.mcp, json=body, headers=headers)
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["result"]["structuredContent"] == {"text": "counted"}


@pytest.mark.parametrize(
    "stays",
    [0.0, WATCH_AFTER + 0.3],
    ids=["leaves-before-the-watch-starts", "leaves-while-watched"],
)
async def test_a_client_that_leaves_a_quiet_call_cancels_it(quiet: Server, stays: float) -> None:
    probe = quiet.probe
    probe.started.clear()
    probe.cancelled.clear()
    headers, body = _call("wait_for_cancel")
    async with httpx.AsyncClient(timeout=10) as http:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: http.post(quiet.mcp, json=body, headers=headers))
                assert await anyio.to_thread.run_sync(probe.started.wait, 5)
                await anyio.sleep(stays)
                tg.cancel_scope.cancel()  # the request's connection closes
            assert await anyio.to_thread.run_sync(probe.cancelled.wait, 5)
        # The server goes on answering.
        headers, body = _call("count_up")
        after = await http.post(quiet.mcp, json=body, headers=headers)
    assert after.json()["result"]["structuredContent"] == {"text": "counted"}


async def test_a_quiet_call_answered_in_full_is_not_cancelled(quiet: Server) -> None:
    """The read that waits for a departure ends with the answer: nothing leaks to later."""
    headers, body = _call("nap")
    async with httpx.AsyncClient(timeout=10) as http:
        answers = [await http.post(quiet.mcp, json=body, headers=headers) for _ in range(3)]
    assert [a.json()["result"]["structuredContent"] for a in answers] == [{"text": "rested"}] * 3


@pytest.mark.parametrize(
    "meta",
    ["not an object", {"progressToken": None}],
    ids=["meta-not-an-object", "progress-token-null"],
)
async def test_a_request_this_cannot_classify_gets_the_sdks_own_answer(
    quiet: Server, streaming: Server, meta: Any
) -> None:
    headers, body = _call("count_up")
    body["params"]["_meta"] = meta
    async with httpx.AsyncClient(timeout=10) as http:
        ours = await http.post(quiet.mcp, json=body, headers=headers)
        sdks = await http.post(streaming.mcp, json=body, headers=headers)
    assert (ours.status_code, ours.headers["content-type"]) == (
        sdks.status_code,
        sdks.headers["content-type"],
    )
    assert ours.text == sdks.text


async def test_a_client_that_does_not_accept_streams_is_refused_as_before(
    quiet: Server, streaming: Server
) -> None:
    """The JSON mode would answer it; the streaming mode refuses it, quiet or not."""
    headers, body = _call("count_up")
    headers["Accept"] = "application/json"
    async with httpx.AsyncClient(timeout=10) as http:
        ours = await http.post(quiet.mcp, json=body, headers=headers)
        sdks = await http.post(streaming.mcp, json=body, headers=headers)
    assert ours.status_code == sdks.status_code == 406
