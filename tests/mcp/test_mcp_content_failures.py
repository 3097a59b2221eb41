"""Resource and prompt handlers that fail, and arguments no handler should be handed.

uvicorn on 127.0.0.1 and the official MCP client, in both protocol eras (the handshake-era
session is stateful and resumable, the default): text a handler produced that no UTF-8
can hold is the handler's failure (``-32603`` with an error id), and the session goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import mcp.types as types
import pytest
from mcp.client import Client
from mcp.server.streamable_http import EventMessage
from mcp.shared.exceptions import MCPError
from mcp_support import serve
from tests.builders import mcp_http_client
from tests.unsendable_content import ADA, build_host

from charter import Failed
from charter.mcp import OUTCOME_META_KEY, MemoryEventStore, create_asgi_app, create_server

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(create_asgi_app(build_host())) as served:
        yield served + "/mcp"


def _failure(raised: pytest.ExceptionInfo[MCPError]) -> dict[str, object]:
    outcome: dict[str, object] = raised.value.data[OUTCOME_META_KEY]
    return outcome


async def test_unsendable_text_from_a_handler_is_its_failure_and_the_session_goes_on(
    url: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="charter")
    summary = types.PromptReference(type="ref/prompt", name="brief")
    async with mcp_http_client(url, "ada-token", mode=mode, read_timeout_seconds=10) as client:
        with pytest.raises(MCPError) as read:
            await client.read_resource("text://unsendable")
        with pytest.raises(MCPError) as got:
            await client.get_prompt("garbled", {"topic": "visas"})
        with pytest.raises(MCPError) as completed:
            await client.complete(summary, {"name": "topic", "value": ""})
        with pytest.raises(MCPError) as refusal:
            await client.read_resource("text://refused")
        # The same session still answers.
        listed = await client.list_resources()
        after = await client.read_resource("file://notes")
    # A refusal keeps its code and words; the character no encoding carries is U+FFFD.
    assert refusal.value.code == -32002 and "No note \ufffd." in refusal.value.message
    for raised in (read, got, completed):
        assert raised.value.code == types.INTERNAL_ERROR
        failure = _failure(raised)
        assert failure["code"] == "PROVIDER_ERROR"
        meta = failure["meta"]
        assert isinstance(meta, dict) and meta["reason"] == "handler_failed"
        assert meta["errorId"] in raised.value.message
        assert meta["errorId"] in caplog.text
    assert "the handler of resource 'unsendable'" in caplog.text
    assert [str(r.uri) for r in listed.resources] == ["text://unsendable", "text://refused"]
    assert after.contents[0].text == "notes"  # type: ignore[union-attr]


async def test_a_tool_whose_output_or_refusal_utf8_cannot_encode_leaves_the_session_working(
    url: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="charter")
    async with mcp_http_client(url, "ada-token", mode=mode, read_timeout_seconds=10) as client:
        output = await client.call_tool("files.list", {"path": "here"})
        refusal = await client.call_tool("files.list", {"path": "missing"})
        after = await client.read_resource("file://notes")
    assert output.is_error and refusal.is_error
    failure = output.meta[OUTCOME_META_KEY] if output.meta else {}
    assert failure["code"] == "INVALID_OUTPUT"
    assert failure["meta"]["errorId"] in caplog.text
    # A refusal keeps its words; the character no encoding can carry becomes U+FFFD.
    assert "No folder caf\ufffd." in refusal.content[0].text  # type: ignore[union-attr]
    assert after.contents[0].text == "notes"  # type: ignore[union-attr]


async def test_a_prompt_refuses_arguments_it_does_not_declare_naming_them(
    url: str, mode: str
) -> None:
    async with mcp_http_client(url, "ada-token", mode=mode) as client:
        with pytest.raises(MCPError) as extra:
            await client.get_prompt("brief", {"topic": "visas", "tonne": "dry"})
        fine = await client.get_prompt("brief", {"topic": "visas", "tone": "dry"})
    assert extra.value.code == types.INVALID_PARAMS
    assert "tonne" in extra.value.message
    failure = _failure(extra)
    assert failure["code"] == "INVALID_INPUT"
    assert failure["meta"] == {
        "reason": "invalid_arguments",
        "issues": [
            {"loc": ["tonne"], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}
        ],
    }
    assert fine.messages[0].content.text == "Write about visas."  # type: ignore[union-attr]


async def test_template_variables_with_control_characters_are_refused_the_rest_is_the_handlers(
    url: str,
) -> None:
    async with mcp_http_client(url, "ada-token") as client:
        with pytest.raises(MCPError) as nul:
            await client.read_resource("file://%00")
        with pytest.raises(MCPError) as line_break:
            await client.read_resource("file://a%0Ab")
        traversal = await client.read_resource("file://a%2F..%2F..%2Fetc%2Fpasswd")
    for raised in (nul, line_break):
        assert raised.value.code == types.INVALID_PARAMS
        failure = _failure(raised)
        assert failure["code"] == "INVALID_INPUT"
        assert failure["meta"] == {
            "reason": "invalid_arguments",
            "issues": [{"loc": ["path"], "msg": "control characters are not allowed"}],
        }
    # Decoded '/' and '..' reach the handler: a handler using a value as a path checks it.
    assert traversal.contents[0].text == "a/../../etc/passwd"  # type: ignore[union-attr]


async def test_a_lone_surrogate_in_arguments_or_variables_is_refused_as_tool_input_is() -> None:
    # Over HTTP the transport refuses the JSON itself; an in-memory client hands the
    # strings over as they are, and the host refuses them.
    host = build_host()
    async with Client(create_server(host, principal=ADA), mode="legacy") as client:
        with pytest.raises(MCPError) as argument:
            await client.get_prompt("brief", {"topic": "\ud800"})
        with pytest.raises(MCPError) as variable:
            await client.read_resource("file://a\ud800")
        after = await client.get_prompt("brief", {"topic": "visas"})
    for raised in (argument, variable):
        assert raised.value.code == types.INVALID_PARAMS
        failure = _failure(raised)
        assert failure["code"] == "INVALID_INPUT"
        assert failure["meta"] == {"reason": "lone_surrogate", "issues": []}
    assert after.messages[0].content.text == "Write about visas."  # type: ignore[union-attr]
    named = await host.content.get_prompt("brief", {"topic": "x", "\udfff": "y"}, ADA)
    assert isinstance(named, Failed) and named.reason == "lone_surrogate"


async def test_the_event_store_keeps_a_message_utf8_cannot_encode() -> None:
    # The SDK stores every outgoing message in the session's message router: a store that
    # raised there would end the router, and every later request of the session.
    store = MemoryEventStore()
    first = await store.store_event("s", None)
    unsendable = types.JSONRPCResponse(jsonrpc="2.0", id=1, result={"text": "a\ud800b"})
    await store.store_event("s", unsendable)
    replayed: list[EventMessage] = []

    async def collect(event: EventMessage) -> None:
        replayed.append(event)

    assert await store.replay_events_after(first, collect) == "s"
    [event] = replayed
    assert isinstance(event.message, types.JSONRPCResponse)
    assert event.message.result == {"text": "a\ufffdb"}
