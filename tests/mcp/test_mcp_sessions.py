"""What one principal can exhaust over stateful streamable HTTP: its own sessions, no one else's.

uvicorn on 127.0.0.1 with sessions opened by raw ``initialize`` requests, so the test
holds each session id and can ask about it afterwards.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import pytest
from mcp_support import ALICE, BOB, TOKENS, Probe, build_registry, serve
from starlette.applications import Starlette
from starlette.routing import Route
from tests.builders import MCP_HEADERS, MCP_INITIALIZE, MCP_PING

from charter.auth import Principal, StaticAuthenticator
from charter.errors import ConfigurationError
from charter.host import Host
from charter.mcp import SessionLimits, streamable_http_app
from charter.mcp.http import StreamableHTTPApp

ALICE_AT_GLOBEX = Principal(subject="alice", tenant_id="globex", scopes=ALICE.scopes)
"""Alice's subject in another tenant: another principal."""
ALICE_SECOND_KEY = Principal(
    subject="alice", tenant_id="acme", scopes=ALICE.scopes, api_key_id="alice-key-2"
)
"""Alice again, through another API key: the same principal, another credential."""
WAIT_SECONDS = 30


def _host() -> Host:
    tokens = {
        **TOKENS,
        "alice-globex-token": ALICE_AT_GLOBEX,
        "alice-second-key": ALICE_SECOND_KEY,
    }
    return Host(build_registry(Probe()), authenticator=StaticAuthenticator(tokens))


@contextmanager
def served(limits: SessionLimits) -> Iterator[tuple[str, StreamableHTTPApp]]:
    """MCP at ``/mcp`` under uvicorn with ``limits``; yields its URL and the MCP app."""
    mcp = streamable_http_app(_host(), json_response=True, session_limits=limits)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.run():
            yield

    app = Starlette(
        routes=[Route("/mcp", mcp.app, methods=["GET", "POST", "DELETE"])], lifespan=lifespan
    )
    with serve(app) as url:
        yield url + "/mcp", mcp


def open_session(http: httpx.Client, url: str, token: str) -> str:
    response = http.post(url, json=MCP_INITIALIZE, headers=_auth(token))
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


def ping(http: httpx.Client, url: str, token: str, session: str) -> int:
    headers = {**_auth(token), "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    return http.post(url, json=MCP_PING, headers=headers).status_code


def _auth(token: str) -> dict[str, str]:
    return {**MCP_HEADERS, "Authorization": f"Bearer {token}"}


def test_a_principal_past_its_cap_loses_its_oldest_sessions_and_no_one_else_does() -> None:
    with served(SessionLimits(per_principal=3)) as (url, mcp), httpx.Client(timeout=30) as http:
        bobs = open_session(http, url, "bob-token")
        globex = open_session(http, url, "alice-globex-token")
        alices = [open_session(http, url, "alice-token") for _ in range(5)]
        alive = [ping(http, url, "alice-token", s) for s in alices]
        others = [ping(http, url, "bob-token", bobs), ping(http, url, "alice-globex-token", globex)]
        counts = [mcp.open_sessions(p) for p in (ALICE, BOB, ALICE_AT_GLOBEX)]
    # The two oldest were closed (404: open a new session); the newest three live on.
    assert alive == [404, 404, 200, 200, 200]
    # Another principal, and the same subject in another tenant, kept theirs.
    assert others == [200, 200]
    assert counts == [3, 1, 1]


def test_a_closed_session_no_longer_counts_against_the_cap() -> None:
    with served(SessionLimits(per_principal=2)) as (url, mcp), httpx.Client(timeout=30) as http:
        first, second = (open_session(http, url, "alice-token") for _ in range(2))
        deleted = http.delete(
            url, headers={**_auth("alice-token"), "Mcp-Session-Id": first}
        ).status_code
        third = open_session(http, url, "alice-token")
        alive = [ping(http, url, "alice-token", s) for s in (second, third)]
        count = mcp.open_sessions(ALICE)
    assert deleted == 200
    assert alive == [200, 200]
    assert count == 2


def test_a_foreign_credential_cannot_make_the_cap_forget_a_session() -> None:
    with served(SessionLimits(per_principal=1)) as (url, mcp), httpx.Client(timeout=30) as http:
        alices = open_session(http, url, "alice-token")
        foreign = ping(http, url, "bob-token", alices)
        count = mcp.open_sessions(ALICE)
        newer = open_session(http, url, "alice-token")
        statuses = [ping(http, url, "alice-token", s) for s in (alices, newer)]
    assert foreign == 404  # the SDK hides another principal's session
    assert count == 1
    assert statuses == [404, 200]


def test_the_same_principals_other_key_cannot_make_the_cap_forget_a_session() -> None:
    # The SDK binds a session to the credential that opened it (one API key), the cap
    # counts the principal's: a request from Alice's other key naming a session her first
    # key opened is answered 404, and the session lives on, so the cap keeps counting it.
    with served(SessionLimits(per_principal=2)) as (url, mcp), httpx.Client(timeout=30) as http:
        sessions = []
        touches = []
        for _ in range(4):
            sessions.append(open_session(http, url, "alice-token"))
            touches.append(ping(http, url, "alice-second-key", sessions[-1]))
        alive = [ping(http, url, "alice-token", s) for s in sessions]
        counts = [mcp.open_sessions(p) for p in (ALICE, ALICE_SECOND_KEY)]
    assert touches == [404, 404, 404, 404]
    # The cap held: the two oldest were closed, and both keys count as one principal.
    assert alive == [404, 404, 200, 200]
    assert counts == [2, 2]


def test_a_sessionless_2026_request_neither_opens_nor_ends_a_session() -> None:
    # A 2026-07-28 request belongs to no session, whatever Mcp-Session-Id it names (the
    # SDK answers it 404): the cap lets it through, and neither counts the id it names nor
    # forgets the live session it names.
    modern = {
        **_auth("alice-token"),
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "ping",
    }
    meta = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    with served(SessionLimits(per_principal=1)) as (url, mcp), httpx.Client(timeout=30) as http:
        alices = open_session(http, url, "alice-token")
        for named in ("made-up-session", alices):
            http.post(
                url, json={**MCP_PING, "params": meta}, headers={**modern, "Mcp-Session-Id": named}
            )
        count = mcp.open_sessions(ALICE)
        alive = ping(http, url, "alice-token", alices)
    assert count == 1
    assert alive == 200


def test_an_idle_session_is_closed_after_the_idle_timeout_and_forgotten() -> None:
    closed = _SdkLog("idle timeout")
    with (
        served(SessionLimits(idle_timeout=0.5)) as (url, mcp),
        httpx.Client(timeout=30) as http,
        closed,
    ):
        session = open_session(http, url, "alice-token")
        assert closed.seen.wait(WAIT_SECONDS)
        status = ping(http, url, "alice-token", session)
        count = mcp.open_sessions(ALICE)
    assert status == 404
    assert count == 0


def test_session_limits_refuse_nonsense() -> None:
    for bad in (
        {"per_principal": 0},
        {"max_sessions": -1},
        {"idle_timeout": 0.0},
        {"idle_timeout": float("inf")},
    ):
        with pytest.raises(ConfigurationError, match="SessionLimits"):
            SessionLimits(**bad)


class _SdkLog(logging.Handler):
    """Sets ``seen`` when the SDK's session manager logs a line containing ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.INFO)
        self.text = text
        self.seen = threading.Event()
        self._logger = logging.getLogger("mcp.server.streamable_http_manager")

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()

    def __enter__(self) -> _SdkLog:
        self._previous = self._logger.level
        self._logger.setLevel(logging.INFO)
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._previous)
