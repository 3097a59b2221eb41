"""Instructions per MCP ``tools/call``, in process: ``python -m bench.profile_mcp KIND ERA N``.

Builds one app of ``bench.load_servers`` (``charter-mcp``, ``sdk-mcp`` or
``sdk-mcp-bearer``, each also ``-stateless``), runs its lifespan, opens a session where the era
needs one (``legacy``, stateful: ``initialize`` then ``notifications/initialized``), and
sends N ``tools/call`` requests of ``add`` as the throughput case's wrk does (a raw ASGI
driver: no server, no sockets), checking each answer. ERA is ``modern`` (2026-07-28) or
``legacy`` (2025-11-25); ``session`` (stateful kinds only) counts whole handshake-era
sessions instead: each of the N opens one (``initialize``, ``notifications/initialized``),
makes one call on it and ends it with ``DELETE``, so creating and tearing a session down
is measured with the call. Thirty warm-up calls (or sessions) come first;
``os.getppid()`` is called just before and just after the N measured ones, so callgrind
can count them alone, without the imports and the set-up (``--instr-atstart=no`` with
``CHARTER_BENCH_CALLGRIND=1`` switches counting on at the first mark, for a run many
times faster)::

    CHARTER_BENCH_CALLGRIND=1 valgrind --tool=callgrind --instr-atstart=no \\
        --dump-before=os_getppid --callgrind-out-file=/tmp/cg.mcp \\
        .venv/bin/python -m bench.profile_mcp charter-mcp modern 300

``/tmp/cg.mcp.2`` then holds the N calls: its ``summary`` divided by N is what one call
costs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

from bench.load_servers import KINDS, TOKEN, post_scope

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
SESSION = "session"
ERAS = {"modern": MODERN, "legacy": LEGACY, SESSION: SESSION}
WARM_UP = 30
MCP_KINDS = (
    "charter-mcp",
    "charter-mcp-stateless",
    "sdk-mcp",
    "sdk-mcp-stateless",
    "sdk-mcp-bearer",
    "sdk-mcp-bearer-stateless",
)

Headers = list[tuple[bytes, bytes]]


def _headers(era: str | None, body: bytes, session: str | None = None) -> Headers:
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"authorization", f"Bearer {TOKEN}".encode()),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if era is not None:
        headers.append((b"mcp-protocol-version", era.encode()))
    if era == MODERN:
        headers += [(b"mcp-method", b"tools/call"), (b"mcp-name", b"add")]
    if session is not None:
        headers.append((b"mcp-session-id", session.encode()))
    return headers


def _call(era: str, request_id: int) -> bytes:
    params: dict[str, Any] = {"name": "add", "arguments": {"a": 1, "b": 2}}
    if era == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "wrk", "version": "4"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(body, separators=(",", ":")).encode()


async def _post(app: Any, headers: Headers, body: bytes) -> tuple[int, dict[str, str], bytes]:
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            await asyncio.Event().wait()  # a second read waits, as for a client that stays
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(post_scope("/mcp", headers), receive, send)
    answer = {k.decode().lower(): v.decode() for k, v in sent[0].get("headers", [])}
    return sent[0]["status"], answer, b"".join(m.get("body", b"") for m in sent[1:])


async def _open_session(app: Any) -> str:
    initialize = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "wrk", "version": "4"},
            },
        }
    ).encode()
    status, headers, body = await _post(app, _headers(None, initialize), initialize)
    if status != 200:
        raise SystemExit(f"initialize answered {status}: {body[:300]!r}")
    session = headers["mcp-session-id"]
    done = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    await _post(app, _headers(LEGACY, done, session), done)
    return session


async def _session_round(app: Any, request_id: int) -> None:
    """One whole handshake-era session: opened, one call, ended with ``DELETE``."""
    session = await _open_session(app)
    body = _call(LEGACY, request_id)
    status, _, answer = await _post(app, _headers(LEGACY, body, session), body)
    if status != 200 or b'"result":3' not in answer.replace(b" ", b""):
        raise SystemExit(f"unexpected answer {status}: {answer[:300]!r}")
    delete = post_scope("/mcp", _headers(LEGACY, b"", session))
    delete["method"] = "DELETE"
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(delete, receive, send)
    if sent[0]["status"] != 200:
        raise SystemExit(f"DELETE answered {sent[0]['status']}")


async def between_requests() -> None:
    """Let the event loop run what a request left to it, as a server's loop would.

    An app answered in process may never suspend, so without this the callbacks and task
    steps it scheduled (a cancelled read's last step, say) would pile up unrun: their cost
    left out of the count, their objects kept alive. Two turns of the loop: a cancelled
    task takes one step to finish and one more for its done callbacks.
    """
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def _mark() -> None:
    """Where callgrind (``--dump-before=os_getppid``) cuts its counts."""
    os.getppid()


async def run(kind: str, era: str, calls: int) -> None:
    """Build ``kind``'s app, enter its lifespan, send ``calls`` calls after the warm-up."""
    app: Any = KINDS[kind]()
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    session = None
    if era == LEGACY and not kind.endswith("-stateless"):
        session = await _open_session(app)
    for index in range(WARM_UP + calls):
        if index == WARM_UP:
            if os.environ.get("CHARTER_BENCH_CALLGRIND"):
                pid = str(os.getpid())
                subprocess.run(["callgrind_control", "-i", "on", pid], capture_output=True)
            _mark()
        if era == SESSION:
            await _session_round(app, index + 10)
            await between_requests()
            continue
        body = _call(era, index + 10)
        status, _, answer = await _post(app, _headers(era, body, session), body)
        if status != 200 or b'"result":3' not in answer.replace(b" ", b""):
            raise SystemExit(f"unexpected answer {status}: {answer[:300]!r}")
        await between_requests()
    _mark()
    await lifespan.__aexit__(None, None, None)


def main(argv: list[str]) -> None:
    """Send the calls of one kind and era."""
    stateless_session = argv[1:2] == [SESSION] and argv[0].endswith("-stateless")
    if len(argv) != 3 or argv[0] not in MCP_KINDS or argv[1] not in ERAS or stateless_session:
        raise SystemExit(
            f"usage: python -m bench.profile_mcp {'|'.join(MCP_KINDS)} modern|legacy N, "
            "or charter-mcp|sdk-mcp|sdk-mcp-bearer session N"
        )
    asyncio.run(run(argv[0], ERAS[argv[1]], int(argv[2])))


if __name__ == "__main__":
    main(sys.argv[1:])
