"""JWT bearer tokens end to end: uvicorn on 127.0.0.1, REST and MCP, keys from a local JWKS."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from http_support import Lab, Live, assert_problem, build_registry, mcp_client, serve
from jwt.algorithms import RSAAlgorithm
from tests.builders import MCP_HEADERS, MCP_INITIALIZE

from charter.host import Host
from charter.http import create_app
from charter.jwt import JwtAuthenticator
from live_server import json_server

pytestmark = pytest.mark.anyio

ISSUER = "https://issuer.example"
AUDIENCE = "https://tools.example"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def token(*, key: Any = KEY, **overrides: Any) -> str:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "agent-7",
        "tenant_id": "acme",
        "scope": "trips:read trips:write",
        "iat": now,
        "exp": now + 300,
        **overrides,
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture(scope="module")
def jwks_url() -> Iterator[str]:
    """The issuer's JWKS on a loopback port (stdlib server, no network)."""
    jwk = {**RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True), "kid": "k1", "alg": "RS256"}
    body = json.dumps({"keys": [jwk]}).encode()

    with json_server(lambda path: (200, body)) as url:
        yield f"{url}/jwks.json"


@pytest.fixture(scope="module")
def live(jwks_url: str) -> Iterator[Live]:
    lab = Lab()
    authenticator = JwtAuthenticator(issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks_url)
    host = Host(build_registry(lab), authenticator=authenticator)
    with serve(create_app(host)) as url:
        yield Live(url=url, host=host, lab=lab)


def test_a_jwt_calls_a_tool_over_rest_as_the_principal_its_claims_name(live: Live) -> None:
    with live.client(token()) as rest:
        who = rest.get("/v1/whoami").json()
        listed = {t["name"] for t in rest.get("/v1/tools").json()["tools"]}
        called = rest.post("/v1/tools/trips.search:call", json={"query": "lisbon", "limit": 1})
    assert (who["subject"], who["tenantId"]) == ("agent-7", "acme")
    assert who["scopes"] == ["trips:read", "trips:write"]
    assert {"trips.search", "trips.rename"} <= listed
    assert "bookings.refund" not in listed  # the token grants no bookings:refund
    assert called.status_code == 200
    assert called.json()["output"]["trips"][0]["trip_id"] == "trp_1"


async def test_a_jwt_calls_a_tool_over_mcp_streamable_http(live: Live) -> None:
    async with mcp_client(live.url, token()) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("trips.search", {"query": "lisbon", "limit": 1})
    assert "trips.search" in names
    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["trips"][0]["trip_id"] == "trp_1"


NOT_A_NUMERIC_DATE = (
    "the token's 'exp' claim is not a NumericDate (seconds since 1970, a JSON number)"
)
BAD_TOKENS: list[tuple[dict[str, Any], str]] = [
    ({"exp": int(time.time()) - 3600}, "the token has expired"),
    ({"key": OTHER_KEY}, "the token's signature is not valid"),
    ({"aud": "https://elsewhere.example"}, "the token is meant for another audience"),
    ({"tenant_id": None}, "the token has no 'tenant_id' claim"),
    ({"exp": 1e300}, NOT_A_NUMERIC_DATE),
    ({"exp": "{future}"}, NOT_A_NUMERIC_DATE),
    ({"tenant_id": "acme\x00"}, "the token's tenant holds a control character"),
]


@pytest.mark.parametrize(("overrides", "detail"), BAD_TOKENS, ids=[d for _, d in BAD_TOKENS])
async def test_a_bad_jwt_is_a_401_challenge_over_rest_and_mcp(
    live: Live, overrides: dict[str, Any], detail: str
) -> None:
    # Minted here, not at collection: a long run must not turn every token into "expired".
    if overrides.get("exp") == "{future}":
        overrides = {"exp": str(int(time.time()) + 300)}
    bad = token(**overrides)
    async with httpx.AsyncClient(base_url=live.url, timeout=10) as http:
        rest = await http.post(
            "/v1/tools/trips.search:call",
            json={"query": "lisbon"},
            headers={"Authorization": f"Bearer {bad}"},
        )
        mcp = await http.post(
            "/mcp", json=MCP_INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {bad}"}
        )
    assert_problem(rest, 401, code="UNAUTHENTICATED", reason="invalid_token", detail=detail)
    assert rest.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert bad.split(".")[2] not in rest.text
    assert mcp.status_code == 401
    assert mcp.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
