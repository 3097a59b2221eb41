"""A REST call whose client goes away is cancelled; the other calls in flight are not.

Driven as raw ASGI (no server), so a test decides when each client disconnects.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from starlette.types import Message

from charter import Registry, ToolContext, tool
from charter.auth import Principal, StaticAuthenticator
from charter.host import Host
from charter.http import create_app

TOKEN = "disconnect-token"
PRINCIPAL = Principal(subject="u", tenant_id="t", scopes=frozenset({"x:read"}))

pytestmark = pytest.mark.anyio


class _Tool:
    """A tool that waits for ``release``; its calls end cancelled when their signal fires."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = 0

    def host(self) -> Host:
        @tool(tier="read", required_scopes=["x:read"])
        async def wait(label: str, ctx: ToolContext) -> str:
            """Wait until released."""
            self.started += 1
            await self.release.wait()
            return label

        registry = Registry()
        registry.register(wait)
        return Host(registry, authenticator=StaticAuthenticator({TOKEN: PRINCIPAL}))


class _Client:
    """One request to the call route, and the client that may go away after its body."""

    def __init__(self, label: str) -> None:
        self.body = json.dumps({"label": label}).encode()
        self.gone = asyncio.Event()
        self.sent: list[Message] = []
        self._read = False

    def scope(self) -> dict[str, Any]:
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/tools/wait:call",
            "raw_path": b"/v1/tools/wait:call",
            "root_path": "",
            "query_string": b"",
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 50000),
            "headers": [
                (b"host", b"127.0.0.1:8000"),
                (b"authorization", f"Bearer {TOKEN}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(self.body)).encode()),
            ],
        }

    async def receive(self) -> dict[str, Any]:
        if not self._read:
            self._read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def answer(self) -> tuple[int, Any]:
        body = b"".join(m.get("body", b"") for m in self.sent[1:])
        return self.sent[0]["status"], json.loads(body)


async def _until(predicate: Any) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out waiting")


async def test_the_call_of_a_client_that_went_away_is_cancelled_and_only_that_one() -> None:
    waiting = _Tool()
    app = create_app(waiting.host(), mcp=False, console=False)
    leaving, staying = _Client("leaving"), _Client("staying")
    async with app.router.lifespan_context(app):
        calls = [asyncio.create_task(app(c.scope(), c.receive, c.send)) for c in (leaving, staying)]
        await _until(lambda: waiting.started == 2)
        # Past the delay after which a running call is watched (50 ms).
        await asyncio.sleep(0.2)
        leaving.gone.set()
        await asyncio.wait_for(calls[0], 5)
        assert not calls[1].done()
        waiting.release.set()
        await asyncio.wait_for(calls[1], 5)
    status, problem = leaving.answer()
    assert (status, problem["code"]) == (503, "CANCELLED")
    assert staying.answer() == (200, {"output": {"result": "staying"}, "replayed": False})


async def test_a_call_that_ends_before_its_client_goes_away_completes() -> None:
    waiting = _Tool()
    waiting.release.set()
    app = create_app(waiting.host(), mcp=False, console=False)
    client = _Client("quick")
    async with app.router.lifespan_context(app):
        await asyncio.wait_for(app(client.scope(), client.receive, client.send), 5)
        client.gone.set()
        # Calls after it, on the same endpoint, are watched as before.
        later = _Client("later")
        await asyncio.wait_for(app(later.scope(), later.receive, later.send), 5)
    assert client.answer() == (200, {"output": {"result": "quick"}, "replayed": False})
    assert later.answer() == (200, {"output": {"result": "later"}, "replayed": False})
