"""``HostCheck`` as raw ASGI: the allowed Host values it remembers never widen what it lets in."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import Message

from charter._asgi import DEFAULT_ALLOWED_HOSTS, HostCheck


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _status(check: HostCheck, *hosts: bytes) -> int:
    """The status ``check`` answers a GET carrying these ``Host`` headers with."""
    sent: list[Message] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/v1/tools", "headers": [(b"host", h) for h in hosts]}
    asyncio.run(check(scope, receive, send))
    return int(sent[0]["status"])


def test_a_remembered_host_is_still_refused_when_sent_twice() -> None:
    check = HostCheck(_ok, allowed_hosts=DEFAULT_ALLOWED_HOSTS)
    assert _status(check, b"127.0.0.1:8000") == 200
    assert _status(check, b"127.0.0.1:8000") == 200  # remembered
    assert _status(check, b"127.0.0.1:8000", b"127.0.0.1:8000") == 421
    assert _status(check, b"127.0.0.1:8000", b"evil.example") == 421
    assert _status(check) == 421


def test_allowed_hosts_are_remembered_up_to_a_bound_and_foreign_ones_never() -> None:
    check = HostCheck(_ok, allowed_hosts=DEFAULT_ALLOWED_HOSTS)
    for port in range(1000, 1200):
        assert _status(check, f"localhost:{port}".encode()) == 200
    assert _status(check, b"evil.example:8000") == 421
    assert _status(check, b"localhost:80x") == 421
    assert 0 < len(check._allowed_seen) <= 64
    assert b"evil.example:8000" not in check._allowed_seen
    assert _status(check, b"localhost:1100") == 200  # past the bound: checked each time
