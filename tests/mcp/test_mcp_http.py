"""End to end over streamable HTTP: uvicorn on 127.0.0.1, the official MCP client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import jsonschema
import mcp.types as types
import pytest
from mcp.client.session import ClientRequestContext
from mcp_support import (
    BOB,
    PRESENTERS,
    Logs,
    Probe,
    build_host,
    error_text,
    request_id,
    serve,
    text_of,
)
from tests.builders import MCP_HEADERS, MCP_INITIALIZE, mcp_http_client

from charter.errors import ConfigurationError
from charter.host import Host
from charter.ledger import ApprovalRecord
from charter.mcp import OUTCOME_META_KEY, STATUS_TOOL, create_asgi_app, streamable_http_app

pytestmark = pytest.mark.anyio


@dataclass
class Live:
    """A running server and what its handlers did."""

    url: str
    host: Host
    probe: Probe

    @property
    def mcp(self) -> str:
        return self.url + "/mcp"


def _serve_mcp_app(**options: Any) -> Iterator[Live]:
    """``create_asgi_app`` with ``options`` on a fresh probe's host, while it serves."""
    probe = Probe()
    host = build_host(probe)
    with serve(create_asgi_app(host, **options)) as url:
        yield Live(url=url, host=host, probe=probe)


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    """Stateful streamable HTTP with bearer authentication (the host's static tokens)."""
    yield from _serve_mcp_app(presenters=PRESENTERS)


@pytest.fixture(scope="module")
def stateless() -> Iterator[Live]:
    """Stateless streamable HTTP answering JSON, as replicas behind a load balancer run it."""
    yield from _serve_mcp_app(stateless=True, json_response=True, request_state_keys=[KEY])


KEY = b"k" * 32


async def test_list_then_call_with_structured_output_valid_for_its_schema(
    live: Live, mode: str
) -> None:
    async with mcp_http_client(live.mcp, "alice-token", mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("echo", {"text": "hi", "times": 3})
        who = await client.call_tool("whoami", {})
    assert "whoami" in tools and STATUS_TOOL in tools and "read_notes" not in tools
    assert tools["rename_trip"].input_schema["properties"]["_charter"]["required"] == ["requestId"]
    assert tools["rename_trip"].meta is not None
    assert tools["rename_trip"].meta["charter/tool"]["requiredScopes"] == ["trips:write"]
    assert result.structured_content == {"text": "hihihi", "times": 3}
    schema = tools["echo"].output_schema
    assert schema is not None
    jsonschema.Draft202012Validator(schema).validate(result.structured_content)
    # The principal comes from the bearer token.
    assert who.structured_content == {"subject": "alice", "tenant_id": "acme"}


async def test_each_error_kind_is_a_tool_result(live: Live) -> None:
    async with mcp_http_client(live.mcp, "alice-token") as client:
        unknown = await client.call_tool("nope", {})
        invalid = await client.call_tool("echo", {"text": 7})
        output = await client.call_tool("bad_output", {})
        failed = await client.call_tool("fail", {"code": "PROVIDER_UNAVAILABLE"})
        missing = await client.call_tool("rename_trip", {"trip_id": "T"})
    assert [
        text_of(r).split("]")[0] + "]" for r in (unknown, invalid, output, failed, missing)
    ] == [
        "[NOT_FOUND]",
        "[INVALID_INPUT]",
        "[INVALID_OUTPUT]",
        "[PROVIDER_UNAVAILABLE]",
        "[INVALID_INPUT]",
    ]
    assert all(r.is_error for r in (unknown, invalid, output, failed, missing))
    assert failed.meta is not None and failed.meta[OUTCOME_META_KEY]["retryable"] is True


async def test_a_missing_scope_is_a_tool_error_naming_the_scope(live: Live) -> None:
    async with mcp_http_client(live.mcp, "carol-token") as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("rename_trip", {"trip_id": "T"})
    assert "rename_trip" not in listed and "read_notes" in listed
    assert "trips:write" in error_text(result, "[AUTHORIZATION_DENIED]")


async def test_approval_round_trip_with_the_ledger_and_a_replay(live: Live, mode: str) -> None:
    rid, trip = request_id(), f"T-{request_id()}"
    arguments: dict[str, Any] = {"trip_id": trip, "_charter": {"requestId": rid, "confirmed": True}}
    async with mcp_http_client(live.mcp, "alice-token", mode=mode) as client:
        pending = await client.call_tool("delete_trip", arguments)
        assert pending.meta is not None
        approval_id = pending.meta[OUTCOME_META_KEY]["interaction"]["id"]
        assert f"approvalId: {approval_id}" in text_of(pending)
        assert isinstance(await live.host.approvals.grant(approval_id, BOB), ApprovalRecord)
        arguments["_charter"]["approvalId"] = approval_id
        done = await client.call_tool("delete_trip", arguments)
    # A new connection (new JSON-RPC ids, new session) retrying the same request: a replay.
    async with mcp_http_client(live.mcp, "alice-token", mode=mode) as client:
        again = await client.call_tool("delete_trip", arguments)
        status = await client.call_tool(STATUS_TOOL, {"requestId": rid})
    assert done.structured_content == {"trip_id": trip, "status": "deleted"}
    assert again.structured_content == done.structured_content
    assert again.meta is not None and again.meta["charter/replayed"] is True
    assert status.structured_content is not None
    assert status.structured_content["status"] == "completed"


async def test_confirmation_by_elicitation(live: Live, mode: str) -> None:
    asked: list[str] = []

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    trip = f"T-{request_id()}"
    async with mcp_http_client(
        live.mcp, "alice-token", mode=mode, elicitation_callback=user
    ) as client:
        result = await client.call_tool(
            "cancel_trip", {"trip_id": trip, "_charter": {"requestId": request_id()}}
        )
    assert result.structured_content == {"trip_id": trip, "status": "cancelled"}
    assert asked == [f"Allow 'cancel_trip' to run on {trip!r}?"]


async def test_progress_and_logs(live: Live) -> None:
    seen_progress: list[float] = []
    logs = Logs()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen_progress.append(progress)

    async with mcp_http_client(
        live.mcp, "alice-token", mode="legacy", logging_callback=logs
    ) as client:
        await client.call_tool("count_up", {}, progress_callback=on_progress)
        await client.call_tool("chatty", {})
    assert seen_progress == [1, 2, 3]
    assert logs.levels == ["debug", "info", "warning"]


async def test_cancellation_reaches_a_sync_handler(live: Live, mode: str) -> None:
    live.probe.started.clear()
    live.probe.saw_cancel.clear()
    async with mcp_http_client(live.mcp, "alice-token", mode=mode) as client:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "wait_for_cancel", {})
                assert await anyio.to_thread.run_sync(live.probe.started.wait, 5)
                tg.cancel_scope.cancel()
            assert await anyio.to_thread.run_sync(live.probe.saw_cancel.wait, 5)


async def test_no_token_is_a_401_challenge_and_a_bad_token_too(live: Live) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        anonymous = await http.post(live.mcp, json=MCP_INITIALIZE, headers=MCP_HEADERS)
        bad = await http.post(
            live.mcp, json=MCP_INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer wrong"}
        )
        good = await http.post(
            live.mcp,
            json=MCP_INITIALIZE,
            headers={**MCP_HEADERS, "Authorization": "Bearer alice-token"},
        )
    for response in (anonymous, bad):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
        assert response.json()["error"] == "invalid_token"
    assert good.status_code == 200


async def test_the_mcp_client_cannot_connect_without_a_token(live: Live) -> None:
    with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises, no session opens
        async with mcp_http_client(live.mcp, mode="legacy"):
            pass


async def test_a_foreign_host_or_origin_is_refused_dns_rebinding(live: Live) -> None:
    auth = {**MCP_HEADERS, "Authorization": "Bearer alice-token"}
    async with httpx.AsyncClient(timeout=10) as http:
        foreign_host = await http.post(
            live.mcp, json=MCP_INITIALIZE, headers={**auth, "Host": "evil.example.com"}
        )
        foreign_origin = await http.post(
            live.mcp, json=MCP_INITIALIZE, headers={**auth, "Origin": "http://evil.example.com"}
        )
        local = await http.post(
            live.mcp,
            json=MCP_INITIALIZE,
            headers={**auth, "Host": "localhost", "Origin": "http://localhost"},
        )
    assert foreign_host.status_code == 421
    assert foreign_host.json()["reason"] == "host_not_allowed"
    # Answered as REST answers it (charter._asgi.HostCheck), not the SDK's plain text.
    assert foreign_origin.status_code == 403
    assert foreign_origin.headers["content-type"] == "application/problem+json"
    assert foreign_origin.json()["reason"] == "origin_not_allowed"
    assert local.status_code == 200


async def test_allowed_hosts_are_configurable(probe: Probe) -> None:
    app = create_asgi_app(build_host(probe), allowed_hosts=["tools.example.com"])
    with serve(app) as url:
        async with httpx.AsyncClient(timeout=10) as http:
            headers = {**MCP_HEADERS, "Authorization": "Bearer alice-token"}
            named = await http.post(
                url + "/mcp", json=MCP_INITIALIZE, headers={**headers, "Host": "tools.example.com"}
            )
            loopback = await http.post(url + "/mcp", json=MCP_INITIALIZE, headers=headers)
    assert named.status_code == 200
    assert loopback.status_code == 421


async def test_a_host_without_an_authenticator_serves_anonymous_callers_public_tools(
    probe: Probe,
) -> None:
    with serve(create_asgi_app(build_host(probe, authenticated=False))) as url:
        async with mcp_http_client(url + "/mcp", "ignored-token") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("whoami", {})
    assert "echo" in names and "whoami" not in names and STATUS_TOOL not in names
    # Not listed, but a call says what would let it run (DESIGN §3, step 2).
    assert text_of(result).startswith("[UNAUTHENTICATED]")


async def test_optional_auth_lets_anonymous_callers_in_and_still_reads_tokens(
    probe: Probe,
) -> None:
    with serve(create_asgi_app(build_host(probe), require_auth=False)) as url:
        async with mcp_http_client(url + "/mcp") as client:
            anonymous = [t.name for t in (await client.list_tools()).tools]
        async with mcp_http_client(url + "/mcp", "alice-token") as client:
            alice = [t.name for t in (await client.list_tools()).tools]
    assert "whoami" not in anonymous and "whoami" in alice


async def test_optional_auth_still_refuses_a_bad_token_as_rest_does(probe: Probe) -> None:
    # require_auth=False admits callers who send no credentials. One who sends a revoked
    # or mistyped key is told so (401 with the challenge), not served as anonymous.
    with serve(create_asgi_app(build_host(probe), require_auth=False)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            for credentials in (
                {"Authorization": "Bearer wrong"},
                {"X-API-Key": "wrong"},
                {"X-API-Key": ""},
            ):
                refused = await http.post(
                    url + "/mcp", json=MCP_INITIALIZE, headers={**MCP_HEADERS, **credentials}
                )
                assert refused.status_code == 401, credentials
                assert refused.headers["www-authenticate"].startswith(
                    'Bearer error="invalid_token"'
                )
            anonymous = await http.post(url + "/mcp", json=MCP_INITIALIZE, headers=MCP_HEADERS)
    assert anonymous.status_code == 200


def test_require_auth_without_an_authenticator_is_a_configuration_error(probe: Probe) -> None:
    with pytest.raises(ConfigurationError, match="authenticator"):
        streamable_http_app(build_host(probe, authenticated=False), require_auth=True)


async def test_stateless_mode_serves_both_protocol_eras(stateless: Live, mode: str) -> None:
    async with mcp_http_client(stateless.mcp, "alice-token", mode=mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool(
            "rename_trip", {"trip_id": "S-1", "_charter": {"requestId": request_id()}}
        )
    assert "rename_trip" in names
    assert result.structured_content == {"trip_id": "S-1", "status": "renamed"}


async def test_stateless_2026_elicitation_survives_a_hop_to_another_replica(
    stateless: Live,
) -> None:
    """The sealed requestState is all a replica needs, given the same keys."""
    other = create_asgi_app(
        build_host(Probe()), stateless=True, json_response=True, request_state_keys=[KEY]
    )
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    headers = {
        **MCP_HEADERS,
        "Authorization": "Bearer alice-token",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "ask_name",
    }
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    with serve(other) as other_url:
        async with httpx.AsyncClient(timeout=10) as http:
            first = await http.post(
                stateless.mcp,
                json={**call, "params": {"name": "ask_name", "arguments": {}, "_meta": meta}},
                headers=headers,
            )
            asked = first.json()["result"]
            assert asked["resultType"] == "input_required"
            [key] = asked["inputRequests"]
            retry = {
                "name": "ask_name",
                "arguments": {},
                "_meta": meta,
                "requestState": asked["requestState"],
                "inputResponses": {key: {"action": "accept", "content": {"name": "Lin"}}},
            }
            second = await http.post(
                other_url + "/mcp", json={**call, "id": 2, "params": retry}, headers=headers
            )
            forged = await http.post(
                other_url + "/mcp",
                json={**call, "id": 3, "params": {**retry, "requestState": "v1.forged"}},
                headers=headers,
            )
    assert second.json()["result"]["structuredContent"] == {"text": "Hello Lin"}
    assert forged.json()["error"]["code"] == types.INVALID_PARAMS


async def test_a_malformed_call_is_a_protocol_error(stateless: Live) -> None:
    headers = {
        **MCP_HEADERS,
        "Authorization": "Bearer alice-token",
        "MCP-Protocol-Version": "2025-11-25",
    }
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            stateless.mcp,
            json={"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"arguments": {}}},
            headers=headers,
        )
    assert response.json()["error"]["code"] == types.INVALID_PARAMS
