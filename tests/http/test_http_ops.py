"""Actions, audit, whoami, health, readiness, CORS, the console files and the MCP mount."""

from __future__ import annotations

import sys
import types
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from http_support import Done, Empty, Lab, Live, build_host, build_registry, serve
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from charter import ErrorCode, Registry, tool
from charter.auth import StaticAuthenticator
from charter.errors import ConfigurationError
from charter.host import Host
from charter.http import create_app
from charter.ledger import ApprovalRecord, MemoryStore


def rename(client: httpx.Client, trip_id: str) -> str:
    request_id = str(uuid.uuid4())
    response = client.post(
        "/v1/tools/trips.rename:call",
        json={"trip_id": trip_id, "name": "x"},
        headers={"Idempotency-Key": request_id},
    )
    assert response.status_code == 200
    return request_id


# -- actions --------------------------------------------------------------------------------


def test_an_action_is_visible_to_its_caller_and_unknown_to_another_tenant(
    live: Live, agent: httpx.Client
) -> None:
    request_id = rename(agent, "trp_status")
    status = agent.get(f"/v1/actions/{request_id}")
    assert status.status_code == 200
    assert status.json()["requestId"] == request_id
    assert status.json()["tool"] == "trips.rename"
    assert status.json()["status"] == "completed"
    with live.client("globex-token") as foreign:
        hidden = foreign.get(f"/v1/actions/{request_id}")
        unknown = foreign.get(f"/v1/actions/{uuid.uuid4()}")
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json()["code"] == ErrorCode.NOT_FOUND
    assert agent.get("/v1/actions/not-a-uuid").status_code == 404


def test_actions_need_credentials(anonymous: httpx.Client) -> None:
    assert anonymous.get(f"/v1/actions/{uuid.uuid4()}").status_code == 401


# -- audit ----------------------------------------------------------------------------------


def test_the_audit_trail_is_tenant_scoped_and_callers_see_their_own(
    live: Live, agent: httpx.Client, approver: httpx.Client
) -> None:
    request_id = rename(agent, "trp_audit")
    approver.post("/v1/tools/trips.search:call", json={"query": "a"})
    mine = agent.get("/v1/audit").json()
    assert mine["tenant"] == "acme"
    assert {e["subject"] for e in mine["events"]} == {"agent-7"}
    assert request_id in [e["requestId"] for e in mine["events"]]
    tenant = approver.get("/v1/audit", params={"limit": 500}).json()["events"]
    assert {"agent-7", "ana"} <= {e["subject"] for e in tenant}
    assert {e["tenant"] for e in tenant} == {"acme"}
    event = next(e for e in tenant if e["requestId"] == request_id)
    assert event["tool"] == "trips.rename"
    assert event["outcome"] == "completed"


def test_only_the_admin_scope_may_read_another_tenants_audit(
    live: Live, agent: httpx.Client
) -> None:
    rename(agent, "trp_adminaudit")
    forbidden = agent.get("/v1/audit", params={"tenant": "globex"})
    assert forbidden.status_code == 403
    assert forbidden.json()["reason"] == "tenant_forbidden"
    assert agent.get("/v1/audit", params={"tenant": "acme"}).status_code == 200
    with live.client("admin-token") as admin:
        acme = admin.get("/v1/audit", params={"tenant": "acme"}).json()
    assert acme["tenant"] == "acme"
    assert acme["events"]
    assert agent.get("/v1/audit", params={"limit": "x"}).status_code == 422
    with live.client() as anonymous:
        assert anonymous.get("/v1/audit").status_code == 401


# -- whoami, health, readiness ----------------------------------------------------------------


def test_whoami_describes_the_caller(approver: httpx.Client, agent: httpx.Client) -> None:
    assert approver.get("/v1/whoami").json() == {
        "subject": "ana",
        "tenantId": "acme",
        "kind": "person",
        "actor": "staff",
        "displayName": "Ana (staff approver)",
        "scopes": ["charter:approve", "trips:read"],
        "approver": True,
        "admin": False,
    }
    assert agent.get("/v1/whoami").json()["approver"] is False


def test_health_and_readiness_answer_without_credentials(anonymous: httpx.Client) -> None:
    assert anonymous.get("/healthz").json() == {"status": "ok"}
    assert anonymous.get("/readyz").json() == {"status": "ok"}


class UnreachableStore(MemoryStore):
    """A store whose database has gone away (the outside world, faked)."""

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        raise ConnectionRefusedError("connection refused")


def test_readiness_is_503_when_the_store_does_not_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = Host(
        build_registry(Lab()),
        store=UnreachableStore(),
        authenticator=StaticAuthenticator({}),
    )
    with serve(create_app(host, mcp=False)) as url, httpx.Client(base_url=url) as client:
        ready = client.get("/readyz")
        assert client.get("/healthz").status_code == 200
    assert ready.status_code == 503
    assert ready.headers["retry-after"] == "1"
    assert ready.json()["reason"] == "store_unreachable"
    assert "connection refused" not in ready.text
    assert "readiness probe" in caplog.text


# -- CORS -----------------------------------------------------------------------------------

ORIGIN = "https://ops.example"
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def test_cors_is_off_by_default(anonymous: httpx.Client) -> None:
    # A page on another origin is not even answered (test_http_origin.py).
    simple = anonymous.get("/v1/tools", headers={"Origin": ORIGIN})
    assert simple.status_code == 403
    assert "access-control-allow-origin" not in simple.headers
    preflight = anonymous.options(
        "/v1/tools/catalog.ping:call",
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_allows_the_configured_origins_and_the_control_headers() -> None:
    host = build_host(Lab())
    with serve(create_app(host, mcp=False, cors_origins=[ORIGIN])) as url:
        with httpx.Client(base_url=url) as client:
            preflight = client.options(
                "/v1/tools/trips.rename:call",
                headers={
                    "Origin": ORIGIN,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization, idempotency-key",
                },
            )
            simple = client.get("/v1/tools", headers={"Origin": ORIGIN})
            other = client.get("/v1/tools", headers={"Origin": "https://evil.example"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    allowed = preflight.headers["access-control-allow-headers"].lower()
    assert "idempotency-key" in allowed and "authorization" in allowed
    assert simple.headers["access-control-allow-origin"] == ORIGIN
    assert "idempotent-replayed" in simple.headers["access-control-expose-headers"].lower()
    assert "access-control-allow-origin" not in other.headers


# -- console files ----------------------------------------------------------------------------


def test_the_console_is_served_with_a_strict_content_security_policy(
    anonymous: httpx.Client,
) -> None:
    root = anonymous.get("/", follow_redirects=False)
    assert root.status_code == 307
    assert root.headers["location"] == "/console/"
    page = anonymous.get("/console/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    for asset in ("app.js", "app.css"):
        assert anonymous.get(f"/console/{asset}").status_code == 200
    # Nothing is fetched from elsewhere at run time.
    for asset in ("", "app.js", "app.css"):
        text = anonymous.get(f"/console/{asset}").text.replace(SVG_NAMESPACE, "")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text
    missing = anonymous.get("/console/nothing.js")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"


def test_every_rest_answer_is_never_stored_nor_sniffed(
    live: Live, agent: httpx.Client, approver: httpx.Client, anonymous: httpx.Client
) -> None:
    # The key travels as X-API-Key, which RFC 9111's rule for Authorization does not cover:
    # a shared cache could keep an approval's arguments for the next caller.
    asked = agent.post(
        "/v1/tools/bookings.refund:call",
        json={"booking_id": "bkg_headers", "amount_cents": 100},
        headers={"Idempotency-Key": str(uuid.uuid4()), "Charter-Confirm": "true"},
    )
    answers = {
        "call": asked,
        "list": approver.get("/v1/approvals"),
        "one": approver.get(f"/v1/approvals/{asked.json()['approvalId']}"),
        "tools": agent.get("/v1/tools"),
        "unauthenticated": anonymous.get("/v1/audit"),
        "unknown route": agent.get("/v1/nothing"),
        "other origin": agent.get("/v1/tools", headers={"Origin": "https://evil.example"}),
    }
    assert {name: r.status_code for name, r in answers.items()} == {
        "call": 202,
        "list": 200,
        "one": 200,
        "tools": 200,
        "unauthenticated": 401,
        "unknown route": 404,
        "other origin": 403,
    }
    for name, response in answers.items():
        assert response.headers.get_list("cache-control") == ["no-store"], name
        assert response.headers.get_list("x-content-type-options") == ["nosniff"], name
    # The console's files are revalidated rather than never stored, as before.
    assert anonymous.get("/console/app.js").headers["cache-control"] == "no-cache"


def test_the_console_can_be_left_out() -> None:
    host = build_host(Lab())
    with serve(create_app(host, mcp=False, console=False)) as url:
        assert httpx.get(f"{url}/console/").status_code == 404


# -- the MCP mount ----------------------------------------------------------------------------


def test_mcp_false_leaves_mcp_out() -> None:
    host = build_host(Lab())
    with serve(create_app(host, mcp=False)) as url:
        assert httpx.post(f"{url}/mcp").status_code == 404


def test_a_tool_under_the_mcp_status_tools_name_is_refused_when_the_app_is_built() -> None:
    @tool(tier="read", name="charter.action_status")
    def status(_: Empty) -> Done:
        """Clash with the MCP adapter's own tool."""
        return Done(key="x", done=True)

    registry = Registry()
    registry.register(status)
    # Refused by create_app, not by the first request to /mcp (when the endpoint is built).
    with pytest.raises(ConfigurationError, match=r"reserved by charter\.mcp"):
        create_app(Host(registry))
    create_app(Host(registry), mcp=False)  # served without MCP, the name is free


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["short"], r"key 0 is 5 bytes; it takes at least 32"),
        ([b"k" * 32, "k" * 31], r"key 1 is 31 bytes"),
        (["k" * 32, b"k" * 32], r"key 1 repeats an earlier key"),
        ([32], r"must be bytes or str; key 0 is int"),
    ],
)
def test_request_state_keys_the_sdk_would_refuse_are_refused_when_the_app_is_built(
    keys: list[Any], message: str
) -> None:
    # The endpoint is built on the first /mcp request; its keys are checked before that.
    with pytest.raises(ConfigurationError, match=message):
        create_app(build_host(Lab()), mcp_request_state_keys=keys)
    create_app(build_host(Lab()), mcp_request_state_keys=keys, mcp=False)


def test_the_mcp_endpoint_is_built_on_the_first_request_to_slash_mcp_and_runs_in_the_lifespan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    seen: dict[str, object] = {}

    class Endpoint:
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await PlainTextResponse("mcp here")(scope, receive, send)

    class Mounted:
        app = Endpoint()

        @asynccontextmanager
        async def run(self) -> AsyncIterator[None]:
            events.append("start")
            yield
            events.append("stop")

    def streamable_http_app(
        host: Host,
        *,
        stateless: bool = False,
        allowed_hosts: list[str] | None = None,
        allowed_origins: list[str] | None = None,
        session_limits: object = None,
        request_state_keys: list[bytes | str] | None = None,
        quiet_json: bool = True,
        max_body_bytes: int | None = None,
    ) -> Mounted:
        seen.update(
            host=host,
            stateless=stateless,
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
            session_limits=session_limits,
            request_state_keys=request_state_keys,
            quiet_json=quiet_json,
            max_body_bytes=max_body_bytes,
        )
        return Mounted()

    # Pins the composition contract with charter.mcp; test_http_mcp.py drives the real one.
    fake = types.ModuleType("charter.mcp")
    fake.streamable_http_app = streamable_http_app  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "charter.mcp", fake)
    host = build_host(Lab())
    limits = object()  # passed through untouched
    app = create_app(
        host,
        mcp_stateless=True,
        allowed_hosts=["charter.local:*", "127.0.0.1:*"],
        mcp_session_limits=limits,  # type: ignore[arg-type]
        mcp_request_state_keys=["k" * 32],
        mcp_quiet_json=False,
        max_body_bytes=4096,
    )
    with serve(app) as url:
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert (events, seen) == ([], {})  # REST alone builds no MCP endpoint
        assert httpx.post(f"{url}/mcp").text == "mcp here"
        assert httpx.post(f"{url}/mcp").text == "mcp here"
        assert events == ["start"]  # built and started once
    assert events == ["start", "stop"]
    assert seen == {
        "host": host,
        "stateless": True,
        "allowed_hosts": ["charter.local:*", "127.0.0.1:*"],
        # The app's one Origin policy: the allowed hosts' http and https forms.
        "allowed_origins": [
            "http://charter.local:*",
            "https://charter.local:*",
            "http://127.0.0.1:*",
            "https://127.0.0.1:*",
        ],
        "session_limits": limits,
        "request_state_keys": ["k" * 32],
        "quiet_json": False,
        "max_body_bytes": 4096,  # the body limit is MCP's own, as REST's
    }
