"""tools/call: every outcome rendered as an MCP result (in memory, through the SDK client)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import jsonschema
import mcp.types as types
import pytest
from mcp.client import Client
from mcp.server.lowlevel import Server
from mcp_support import Logs, Probe, error_text, request_id, text_of

from charter import ErrorCode
from charter._redaction import SERVER_FAULT_CODES
from charter.host import Host
from charter.mcp import OUTCOME_META_KEY, RESOLUTION, STATUS_TOOL, ConnectionState, create_server
from charter.mcp._render import completed_wire, render_outcome
from charter.outcome import Completed, outcome_adapter

pytestmark = pytest.mark.anyio


def _outcome(result: types.CallToolResult) -> Any:
    assert result.meta is not None
    return outcome_adapter.validate_python(result.meta[OUTCOME_META_KEY])


async def test_a_completed_call_returns_structured_output_valid_for_its_schema_and_json_text(
    server: Server[ConnectionState], mode: str
) -> None:
    async with Client(server, mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("echo", {"text": "ab", "times": 2})
    assert result.is_error is False
    assert result.structured_content == {"text": "abab", "times": 2}
    schema = listed["echo"].output_schema
    assert schema is not None
    jsonschema.Draft202012Validator(schema).validate(result.structured_content)
    assert json.loads(text_of(result)) == result.structured_content


@pytest.mark.parametrize("replayed", [False, True])
def test_a_completed_result_sent_as_a_mapping_is_the_rendered_results_wire_form(
    replayed: bool,
) -> None:
    # The adapter answers a completed call with ``completed_wire``'s mapping rather than
    # the model ``render_outcome`` builds: on the wire they must be the same result.
    outcome = Completed(output={"text": "ab", "nested": {"n": [1, 2.5, None]}}, replayed=replayed)
    wire = completed_wire(outcome)
    assert wire == render_outcome(outcome).model_dump(by_alias=True, mode="json", exclude_none=True)
    assert completed_wire(Completed(output=[1, 2])) is None


@pytest.mark.parametrize("code", list(ErrorCode))
async def test_every_error_code_renders_as_an_is_error_result_with_next_steps(
    server: Server[ConnectionState], code: ErrorCode
) -> None:
    async with Client(server) as client:
        result = await client.call_tool("fail", {"code": code.value})
    assert result.is_error is True
    assert result.structured_content is None
    text = text_of(result)
    if code in SERVER_FAULT_CODES:
        # The server's own failures show their code and error id, never their text.
        assert text.startswith(f"[{code.value}] ")
        assert "on purpose" not in text and "Error id: err_" in text
    else:
        assert text.startswith(f"[{code.value}] failing with {code.value} on purpose")
    assert "\nNext steps:\n  - " in text
    failed = _outcome(result)
    assert failed.code is code
    assert result.meta is not None
    assert result.meta["charter/error"]["resolution"] == RESOLUTION[code]


def test_every_error_code_has_an_mcp_rendering() -> None:
    assert set(RESOLUTION) == set(ErrorCode)


async def test_unknown_and_hidden_tools_answer_alike(
    server: Server[ConnectionState],
) -> None:
    async with Client(server) as client:
        unknown = await client.call_tool("no_such_tool", {})
        hidden = await client.call_tool("partner_report", {})
    for result, name in ((unknown, "no_such_tool"), (hidden, "partner_report")):
        assert result.is_error is True
        assert text_of(result).startswith(f"[NOT_FOUND] Unknown tool {name!r}.")
        assert _outcome(result).code is ErrorCode.NOT_FOUND
    assert text_of(unknown).replace("no_such_tool", "X") == text_of(hidden).replace(
        "partner_report", "X"
    )


async def test_a_near_miss_suggests_only_tools_the_caller_may_call(
    server: Server[ConnectionState],
) -> None:
    async with Client(server) as client:
        result = await client.call_tool("ech", {"text": "x"})
    assert "echo" in text_of(result)
    assert "read_notes" not in text_of(result)


async def test_invalid_arguments_name_the_field_in_text_and_meta(
    server: Server[ConnectionState],
) -> None:
    async with Client(server) as client:
        result = await client.call_tool("echo", {"text": "x", "times": 9})
    assert "times" in error_text(result, "[INVALID_INPUT]")
    failed = _outcome(result)
    assert failed.meta["issues"][0]["loc"] == ["times"]


async def test_a_call_without_arguments_is_a_call_with_an_empty_object(
    server: Server[ConnectionState],
) -> None:
    async with Client(server) as client:
        result = await client.call_tool("picture")
    assert result.is_error is False


@pytest.mark.parametrize(
    ("tool", "code", "internals"),
    [
        pytest.param("bad_output", "INVALID_OUTPUT", "no times", id="output-breaking-the-schema"),
        pytest.param("broken_picture", "PROVIDER_ERROR", "presenter bug", id="failing-presenter"),
    ],
)
async def test_a_tool_that_goes_wrong_is_a_tool_error_not_a_protocol_error_or_a_leak(
    server: Server[ConnectionState], tool: str, code: str, internals: str
) -> None:
    # The bad output and the presenter's exception text stay on the server.
    async with Client(server) as client:
        result = await client.call_tool(tool, {})
    assert result.is_error is True
    assert text_of(result).startswith(f"[{code}]")
    assert internals not in text_of(result)


async def test_a_missing_scope_is_a_tool_error_naming_the_scope(host: Host) -> None:
    from mcp_support import CAROL

    async with Client(create_server(host, principal=CAROL)) as client:
        result = await client.call_tool("whoami", {})
    assert "trips:read" in error_text(result, "[AUTHORIZATION_DENIED]")
    assert result.meta is not None
    assert result.meta["charter/challenge"] == (
        'Bearer error="insufficient_scope", scope="trips:read"'
    )


async def test_a_presenter_renders_content_and_the_structured_output_stays(
    server: Server[ConnectionState],
) -> None:
    async with Client(server) as client:
        result = await client.call_tool("picture", {})
    assert result.is_error is False
    assert [block.type for block in result.content] == ["image"]
    image = result.content[0]
    assert isinstance(image, types.ImageContent)
    assert image.mime_type == "image/png"
    assert result.structured_content == {"data": image.data, "mime_type": "image/png"}


async def test_progress_reaches_the_callers_progress_callback(
    server: Server[ConnectionState], mode: str
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(server, mode=mode) as client:
        result = await client.call_tool("count_up", {}, progress_callback=on_progress)
    assert result.is_error is False
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


# The SDK client marks logging/setLevel deprecated (gone at 2026-07-28), but handshake-era
# clients still send it, and this test is about serving them.
@pytest.mark.filterwarnings(
    "ignore:The logging capability is deprecated:mcp.shared.exceptions.MCPDeprecationWarning"
)
async def test_logs_reach_a_handshake_era_client_at_the_level_it_set(
    server: Server[ConnectionState],
) -> None:
    logs = Logs()
    async with Client(server, mode="legacy", logging_callback=logs) as client:
        await client.call_tool("chatty", {})
        assert logs.levels == ["debug", "info", "warning"]
        assert logs.received[1].data == {"message": "working", "data": {"step": 1}}
        assert logs.received[1].logger == "chatty"
        logs.received.clear()
        await client.set_logging_level("warning")
        await client.call_tool("chatty", {})
    assert [(p.level, p.data) for p in logs.received] == [("warning", "careful")]


async def test_logs_reach_a_2026_client_only_at_the_level_it_opted_into(
    server: Server[ConnectionState],
) -> None:
    logs = Logs()
    async with Client(server, logging_callback=logs) as client:
        await client.call_tool("chatty", {})
    assert logs.received == []
    async with Client(server, logging_callback=logs, log_level="info") as client:
        await client.call_tool("chatty", {})
    assert logs.levels == ["info", "warning"]


async def test_cancelling_a_call_sets_the_cancel_signal_a_sync_handler_polls(
    server: Server[ConnectionState], probe: Probe, mode: str
) -> None:
    async with Client(server, mode=mode) as client:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "wait_for_cancel", {})
                assert await anyio.to_thread.run_sync(probe.started.wait, 5)
                tg.cancel_scope.cancel()
            assert await anyio.to_thread.run_sync(probe.saw_cancel.wait, 5)
        # The connection still serves other calls.
        assert (await client.call_tool("echo", {"text": "still here"})).is_error is False


async def test_the_same_request_retried_with_a_new_jsonrpc_id_is_a_replay(
    server: Server[ConnectionState], probe: Probe
) -> None:
    arguments = {"trip_id": "T-1", "_charter": {"requestId": request_id()}}
    async with Client(server) as client:
        first = await client.call_tool("rename_trip", arguments)
        again = await client.call_tool("rename_trip", arguments)
    assert first.is_error is False and again.is_error is False
    assert first.structured_content == again.structured_content
    assert first.meta is None or "charter/replayed" not in first.meta
    assert again.meta is not None and again.meta["charter/replayed"] is True
    assert probe.runs["rename_trip"] == 1


async def test_a_ledgered_call_without_a_request_id_says_how_to_add_one(
    server: Server[ConnectionState],
) -> None:
    async with Client(server) as client:
        result = await client.call_tool("rename_trip", {"trip_id": "T-1"})
    assert '"_charter": {"requestId"' in error_text(result, "[INVALID_INPUT]")


async def test_a_deferred_call_returns_a_handle_the_status_tool_answers(
    server: Server[ConnectionState],
) -> None:
    rid = request_id()
    async with Client(server) as client:
        deferred = await client.call_tool(
            "book_later", {"trip_id": "T-9", "_charter": {"requestId": rid}}
        )
        status = await client.call_tool(STATUS_TOOL, {"requestId": rid})
        unknown = await client.call_tool(STATUS_TOOL, {"requestId": request_id()})
        malformed = await client.call_tool(STATUS_TOOL, {"requestId": "nope"})
    assert deferred.is_error is True
    assert text_of(deferred).startswith("[DEFERRED]")
    assert f'{STATUS_TOOL} with {{"requestId": "{rid}"}}' in text_of(deferred)
    assert _outcome(deferred).kind == "deferred"
    assert status.is_error is False
    assert status.structured_content is not None
    assert status.structured_content["status"] == "deferred"
    assert status.structured_content["request_id"] == rid
    assert text_of(unknown).startswith("[NOT_FOUND]")
    assert text_of(malformed).startswith("[INVALID_INPUT]")
