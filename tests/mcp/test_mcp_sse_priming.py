"""SEP-1699 priming: a stateful session's POST stream opens with an event that has an id, a
``retry`` field and empty data, so a client whose stream breaks knows where to resume and
when. uvicorn on 127.0.0.1; the SSE is read raw (httpx streaming) to see the fields."""

from __future__ import annotations

import threading

import httpx2
import pytest
from tests.mcp.test_mcp_stored_events import ADA, build_registry, call, open_session

from charter.auth import StaticAuthenticator
from charter.host import Host
from charter.mcp import Resumability, create_asgi_app
from live_server import serve

pytestmark = pytest.mark.anyio


async def events(response: httpx2.Response) -> list[dict[str, str]]:
    """Every SSE event of a response as its raw fields (``id``, ``retry``, ``data``…)."""
    found: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if fields:
                found.append(fields)
            fields = {}
            continue
        name, _, value = line.partition(":")
        fields[name] = fields.get(name, "") + value.removeprefix(" ")
    return found


async def call_events(resumability: Resumability | bool, protocol: str) -> list[dict[str, str]]:
    """The events of one ``tools/call`` stream, its header declaring ``protocol``."""
    host = Host(
        build_registry(threading.Event()),
        authenticator=StaticAuthenticator({"ada-token": ADA}),
    )
    with serve(create_asgi_app(host, resumability=resumability)) as base:
        url = base + "/mcp"
        async with httpx2.AsyncClient(timeout=30) as http:
            headers = {**await open_session(http, url), "MCP-Protocol-Version": protocol}
            async with http.stream("POST", url, json=call(1, "quick"), headers=headers) as sent:
                assert sent.headers["content-type"].startswith("text/event-stream")
                return await events(sent)


@pytest.mark.parametrize(
    ("resumability", "retry"), [(True, "1000"), (Resumability(retry_ms=250), "250")]
)
async def test_a_post_stream_opens_with_a_priming_event_that_carries_retry(
    resumability: Resumability | bool, retry: str
) -> None:
    first, *rest = await call_events(resumability, "2025-11-25")
    assert first["id"] and first["data"] == "" and first["retry"] == retry
    assert all(event["id"] and "retry" not in event for event in rest)
    assert '"result"' in rest[-1]["data"]


async def test_a_request_that_declares_an_older_protocol_gets_no_priming_event() -> None:
    # The SDK's gate for clients that cannot parse an empty event (as conformance 0.1.16's
    # server-sse-polling probe declares, whatever its session negotiated).
    sent = await call_events(True, "2025-03-26")
    assert all(event["data"] and "retry" not in event for event in sent)
    assert '"result"' in sent[-1]["data"]


async def test_without_resumability_no_event_has_an_id_or_retry() -> None:
    sent = await call_events(False, "2025-11-25")
    assert all("id" not in event and "retry" not in event for event in sent)
    assert '"result"' in sent[-1]["data"]
