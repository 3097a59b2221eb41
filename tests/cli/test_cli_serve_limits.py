"""What one key or one slow client can exhaust on a real `charter serve` (subprocesses on
127.0.0.1): MCP sessions per principal, connections held by slow heads and bodies, and
the request-state key replicas share. Bounded in count; waits are on conditions.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_support import charter, create_key, notes_host, sqlite
from tests.builders import MCP_HEADERS, MCP_INITIALIZE, MCP_PING, request_id
from tests.store.conftest import SQL_BACKENDS, fresh_database

from charter._serve_protocol import guarded_protocol
from charter.cli._serve_options import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    DEFAULT_SESSIONS_PER_PRINCIPAL,
)
from charter.http import create_app
from charter.mcp import SessionLimits
from live_server import Served, charter_serve, raw_connection, read_until_closed, serve

pytestmark = pytest.mark.slow

TARGET = (Path(__file__).parent / "notes_tools.py").read_text(encoding="utf-8")
"""The notes tools, served under a fresh module name by each test."""

NOTES = ("notes:read", "notes:write")
"""The scopes a key needs to call both notes tools."""


@pytest.fixture
def target(write_target: Callable[[str], str]) -> str:
    return f"{write_target(TARGET)}:registry"


def bearer(key: str) -> dict[str, str]:
    return {**MCP_HEADERS, "Authorization": f"Bearer {key}"}


# -- MCP sessions per principal ---------------------------------------------------------------


def test_a_key_past_its_session_cap_loses_its_oldest_sessions_and_no_one_else_does(
    target: str, tmp_path: Path
) -> None:
    db = sqlite(tmp_path / "sessions.db")
    ann, bob = create_key(db, "acme", "ann", *NOTES), create_key(db, "acme", "bob", *NOTES)
    ann_at_globex = create_key(db, "globex", "ann", *NOTES)
    args = (target, "--db", db, "--mcp-sessions-per-principal", "3")
    with charter_serve(*args, cwd=tmp_path) as served, httpx.Client(timeout=30) as http:
        mcp = served.url + "/mcp"

        def open_session(key: str) -> str:
            response = http.post(mcp, json=MCP_INITIALIZE, headers=bearer(key))
            assert response.status_code == 200, response.text
            return response.headers["mcp-session-id"]

        def ping(key: str, session: str) -> int:
            headers = {**bearer(key), "Mcp-Session-Id": session}
            return http.post(mcp, json=MCP_PING, headers=headers).status_code

        bobs, globex = open_session(bob), open_session(ann_at_globex)
        anns = [open_session(ann) for _ in range(5)]
        alive = [ping(ann, s) for s in anns]
        others = [ping(bob, bobs), ping(ann_at_globex, globex)]
        # Room again for ann: a new session closes her oldest live one, not anyone else's.
        newest = open_session(ann)
        after = [ping(ann, s) for s in [*anns, newest]] + [ping(bob, bobs)]
    assert alive == [404, 404, 200, 200, 200]
    assert others == [200, 200]
    assert after == [404, 404, 404, 200, 200, 200, 200]


def test_the_clis_session_defaults_are_the_libraries() -> None:
    assert SessionLimits() == SessionLimits(
        per_principal=DEFAULT_SESSIONS_PER_PRINCIPAL,
        idle_timeout=DEFAULT_SESSION_IDLE_TIMEOUT,
        max_sessions=DEFAULT_MAX_SESSIONS,
    )


# -- slow connections -------------------------------------------------------------------------

SLOW = 20
"""Connections of each slow kind a test holds open."""


def test_slow_heads_and_bodies_are_closed_after_their_timeouts_while_healthz_answers(
    target: str, tmp_path: Path
) -> None:
    db = sqlite(tmp_path / "slow.db")
    key = create_key(db, "acme", "ann", *NOTES)
    head = b"POST /v1/tools/notes.echo:call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    body_first = (
        "POST /v1/tools/notes.echo:call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
        'Content-Length: 1000\r\n\r\n{"text": "'
    ).encode()
    anonymous_body = (
        b"POST /v1/tools/notes.echo:call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b'Content-Length: 1000\r\n\r\n{"text": "'
    )
    args = (target, "--db", db, "--timeout-header", "2", "--timeout-body", "2")
    with charter_serve(*args, cwd=tmp_path) as served, ExitStack() as held:
        idle = [held.enter_context(raw_connection(served.url)) for _ in range(SLOW)]
        heads = [held.enter_context(raw_connection(served.url, head)) for _ in range(SLOW)]
        bodies = [held.enter_context(raw_connection(served.url, body_first)) for _ in range(SLOW)]
        unread = [held.enter_context(raw_connection(served.url, anonymous_body)) for _ in range(5)]
        during = httpx.get(served.url + "/healthz", timeout=30).status_code
        closed_idle = [status(read_until_closed(s)) for s in idle]
        closed_heads = [status(read_until_closed(s)) for s in heads]
        closed_bodies = [read_until_closed(s) for s in bodies]
        refused = [status(read_until_closed(s)) for s in unread]
        after = httpx.get(served.url + "/healthz", timeout=30).status_code
    assert during == after == 200
    assert closed_idle == closed_heads == [408] * SLOW
    assert [status(r) for r in closed_bodies] == [408] * SLOW
    assert all(problem(r)["reason"] == "body_timeout" for r in closed_bodies)
    # Anonymous, for a tool that needs a key: answered at once, the body never read.
    assert refused == [401] * 5


def test_connections_past_the_cap_are_refused_at_once_and_the_cap_frees_up(
    target: str, tmp_path: Path
) -> None:
    db = sqlite(tmp_path / "cap.db")
    args = (target, "--db", db, "--max-connections", "5", "--timeout-header", "2")
    # The one server of the suite that starts on an empty file and migrates it, as a first
    # `charter serve` does; the others start on a copy of a database at head.
    served_at_first_start = charter_serve(*args, cwd=tmp_path, migrated=False)
    with served_at_first_start as served, ExitStack() as held:
        idle = [held.enter_context(raw_connection(served.url)) for _ in range(5)]
        with raw_connection(served.url) as extra:
            refused = status(read_until_closed(extra))
        freed = [status(read_until_closed(s)) for s in idle]
        after = httpx.get(served.url + "/healthz", timeout=30).status_code
    assert refused == 503
    assert freed == [408] * 5
    assert after == 200


def test_a_head_sent_slowly_on_a_reused_connection_is_timed_too() -> None:
    """The head deadline starts again with the first byte of the next request."""
    guarded = guarded_protocol(head_timeout=0.5, max_connections=None)
    app = create_app(notes_host(), mcp=False, console=False)
    with serve(app, http=guarded, timeout_keep_alive=600) as url:
        with raw_connection(url, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as sock:
            first = read_one_response(sock)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHo")
            second = read_until_closed(sock)
    assert (status(first), status(second)) == (200, 408)


def read_one_response(sock: socket.socket) -> bytes:
    """One response with a ``Content-Length`` body, read off a kept-alive connection."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(next(v for k, v in _fields(head) if k == b"content-length"))
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def _fields(head: bytes) -> list[tuple[bytes, bytes]]:
    lines = head.split(b"\r\n")[1:]
    return [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(b":") for line in lines)]


def status(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:200]
    return int(response.split(b" ", 2)[1])


def problem(response: bytes) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(response.partition(b"\r\n\r\n")[2])
    return body


# -- stateless replicas share the request-state key -------------------------------------------

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


def modern_call(http: httpx.Client, served: Served, key: str, params: dict[str, Any]) -> Any:
    """One 2026-07-28 ``tools/call`` (no session), and its JSON-RPC answer."""
    headers = {
        **bearer(key),
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": params["name"],
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    response = http.post(served.url + "/mcp", json=message, headers=headers)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


def publish_across(
    http: httpx.Client, text: str, asking: tuple[Served, str], answering: tuple[Served, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``notes.publish`` on one replica (it asks to confirm), confirmed on another.

    Each side is a server and the API key to call it with; the results: the question, and
    the answer to the confirmed retry.
    """
    call = {
        "name": "notes.publish",
        "arguments": {"text": text, "_charter": {"requestId": request_id()}},
        "_meta": MODERN_META,
    }
    asked: dict[str, Any] = modern_call(http, *asking, call)["result"]
    [question] = asked["inputRequests"]
    answer = {question: {"action": "accept", "content": {"confirm": True}}}
    retry = {**call, "requestState": asked["requestState"], "inputResponses": answer}
    return asked, modern_call(http, *answering, retry)


@pytest.fixture(params=SQL_BACKENDS)
def shared_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """One database for two replicas: a SQLite file, or a fresh PostgreSQL schema."""
    with fresh_database(request.param, tmp_path / "replicas.db") as url:
        yield url


def test_a_confirmation_asked_by_one_stateless_replica_is_answered_through_another(
    target: str, tmp_path: Path, shared_db: str
) -> None:
    key = create_key(shared_db, "acme", "ann", *NOTES)
    args = (target, "--db", shared_db, "--stateless")
    with (
        charter_serve(*args, cwd=tmp_path) as first,
        charter_serve(*args, cwd=tmp_path) as second,
        httpx.Client(timeout=30) as http,
    ):
        asked, answered = publish_across(http, "hello", (first, key), (second, key))
    assert asked["resultType"] == "input_required"
    assert answered["result"]["structuredContent"] == {"text": "hello"}


def test_replicas_given_the_same_keys_share_them_and_a_short_key_is_refused(
    target: str, tmp_path: Path
) -> None:
    shared = "k" * 64
    env = {"CHARTER_REQUEST_STATE_KEYS": f"{shared} {'o' * 64}"}
    db_a, db_b = sqlite(tmp_path / "a.db"), sqlite(tmp_path / "b.db")
    key_a, key_b = create_key(db_a, "acme", "ann", *NOTES), create_key(db_b, "acme", "ann", *NOTES)
    with (
        charter_serve(target, "--db", db_a, "--stateless", cwd=tmp_path, env=env) as first,
        charter_serve(target, "--db", db_b, "--stateless", cwd=tmp_path, env=env) as second,
        httpx.Client(timeout=30) as http,
    ):
        _, answered = publish_across(http, "hi", (first, key_a), (second, key_b))
    # Two databases, so only the configured keys are shared.
    assert answered["result"]["structuredContent"] == {"text": "hi"}
    short = charter("serve", target, "--request-state-key", "too-short")
    assert short.exit_code == 2
    assert "shorter than 32 bytes" in short.stderr
