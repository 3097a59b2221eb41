"""Credentials that cannot be checked now (the key store is down): 503 and Retry-After, never
401 or 500, over REST and MCP streamable HTTP, with the real app under uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from http_support import Lab, assert_problem, build_registry, serve
from tests.builders import MCP_HEADERS, MCP_INITIALIZE

from charter.auth import AuthenticationUnavailable, Credentials, Principal, StaticAuthenticator
from charter.errors import StoreBusy, StoreUnavailable
from charter.host import Host
from charter.http import create_app
from charter.jwt import JwtAuthenticator

pytestmark = pytest.mark.anyio

PRINCIPAL = Principal(subject="agent", tenant_id="acme", scopes=frozenset({"trips:read"}))


class KeyStoreDown:
    """An authenticator whose key store is unreachable (as `ApiKeyAuthenticator` during a
    PostgreSQL restart), until `up` is set."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.up = False

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        if not self.up:
            raise self.error
        return await StaticAuthenticator({"good": PRINCIPAL}).authenticate(credentials)


@pytest.fixture
def down() -> KeyStoreDown:
    return KeyStoreDown(StoreUnavailable("connection refused"))


@pytest.fixture
def served(down: KeyStoreDown) -> Iterator[tuple[str, Lab]]:
    lab = Lab()
    with serve(create_app(Host(build_registry(lab), authenticator=down))) as url:
        yield url, lab


@pytest.mark.parametrize(
    ("error", "reason"),
    [(StoreUnavailable("gone"), "store_unavailable"), (StoreBusy("locked"), "store_busy")],
)
async def test_the_host_says_the_credentials_could_not_be_checked(
    error: Exception, reason: str
) -> None:
    host = Host(build_registry(Lab()), authenticator=KeyStoreDown(error))
    with pytest.raises(AuthenticationUnavailable) as caught:
        await host.authenticate(Credentials(bearer="good"))
    assert caught.value.reason == reason
    assert caught.value.__cause__ is error


async def down_then_up(
    url: str, down: KeyStoreDown, path: str, body: Any, headers: dict[str, str]
) -> tuple[httpx.Response, httpx.Response]:
    """The answers to one POST with the key ``good``: while the store is down, then once
    it is back."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        request = http.build_request(
            "POST", path, json=body, headers={**headers, "Authorization": "Bearer good"}
        )
        while_down = await http.send(request)
        down.up = True
        return while_down, await http.send(request)


async def test_rest_answers_503_with_retry_after_until_the_store_is_back(
    served: tuple[str, Lab], down: KeyStoreDown
) -> None:
    url, _ = served
    search = {"query": "lisbon"}
    call, after = await down_then_up(url, down, "/v1/tools/trips.search:call", search, {})
    assert_problem(
        call, 503, code="PROVIDER_UNAVAILABLE", reason="store_unavailable", retryable=True
    )
    assert call.headers["retry-after"] == "1"
    assert "connection refused" not in call.text  # the store's own message stays inside
    assert after.status_code == 200  # the same request, once the store is back


async def test_mcp_answers_503_with_retry_after(
    served: tuple[str, Lab], down: KeyStoreDown
) -> None:
    url, _ = served
    response, after = await down_then_up(url, down, "/mcp", MCP_INITIALIZE, MCP_HEADERS)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"] == "temporarily_unavailable"
    assert after.status_code == 200


async def test_an_issuer_whose_keys_cannot_be_fetched_is_a_503_not_a_401() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    authenticator = JwtAuthenticator(
        issuer="https://issuer.example",
        audience="https://tools.example",
        jwks_url=f"http://127.0.0.1:{port}/jwks.json",
    )
    token = (
        "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIiwidHlwIjoiSldUIn0."
        "eyJzdWIiOiJhIn0.c2lnbmF0dXJl"  # well-formed; its signature never gets checked
    )
    with serve(create_app(Host(build_registry(Lab()), authenticator=authenticator))) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            call = await http.post(
                "/v1/tools/trips.search:call",
                json={"query": "lisbon"},
                headers={"Authorization": f"Bearer {token}"},
            )
    assert_problem(call, 503, reason="keys_unavailable")
