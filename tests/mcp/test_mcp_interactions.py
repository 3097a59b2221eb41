"""Interactions: confirmation and questions by elicitation, approvals, sampling (in memory)."""

from __future__ import annotations

from typing import Any, Literal

import mcp.types as types
import pytest
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.server.lowlevel import Server
from mcp_support import BOB, Probe, error_text, request_id, text_of

from charter import ErrorCode
from charter.host import Host
from charter.ledger import ApprovalRecord
from charter.mcp import OUTCOME_META_KEY, ConnectionState

pytestmark = pytest.mark.anyio

Action = Literal["accept", "decline", "cancel"]


class User:
    """A scripted user answering elicitations; records what it was asked."""

    def __init__(self, action: Action = "accept", content: dict[str, Any] | None = None) -> None:
        self.action = action
        self.content = content
        self.asked: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        return types.ElicitResult(
            action=self.action, content=self.content if self.action == "accept" else None
        )


async def test_a_confirmation_is_asked_of_the_user_and_the_call_runs_once_confirmed(
    server: Server[ConnectionState], probe: Probe, mode: str
) -> None:
    user = User(content={"confirm": True})
    async with Client(server, mode=mode, elicitation_callback=user) as client:
        result = await client.call_tool(
            "cancel_trip", {"trip_id": "T-1", "_charter": {"requestId": request_id()}}
        )
    assert result.is_error is False
    assert result.structured_content == {"trip_id": "T-1", "status": "cancelled"}
    assert len(user.asked) == 1
    assert user.asked[0].message == "Allow 'cancel_trip' to run on 'T-1'?"
    assert user.asked[0].requested_schema["required"] == ["confirm"]
    assert probe.runs["cancel_trip"] == 1


@pytest.mark.parametrize(("action", "content"), [("decline", None), ("accept", {"confirm": False})])
async def test_a_user_who_declines_denies_the_call(
    server: Server[ConnectionState],
    probe: Probe,
    mode: str,
    action: Action,
    content: dict[str, Any] | None,
) -> None:
    user = User(action, content)
    async with Client(server, mode=mode, elicitation_callback=user) as client:
        result = await client.call_tool(
            "cancel_trip", {"trip_id": "T-1", "_charter": {"requestId": request_id()}}
        )
    error_text(result, "[DENIED] The user declined")
    assert "cancel_trip" not in probe.runs


async def test_a_dismissed_confirmation_leaves_the_call_waiting_for_one(
    server: Server[ConnectionState], mode: str
) -> None:
    async with Client(server, mode=mode, elicitation_callback=User("cancel")) as client:
        result = await client.call_tool(
            "cancel_trip", {"trip_id": "T-1", "_charter": {"requestId": request_id()}}
        )
    error_text(result, "[CONFIRMATION_REQUIRED]")


async def test_without_elicitation_the_result_says_to_retry_confirmed(
    server: Server[ConnectionState], probe: Probe, mode: str
) -> None:
    rid = request_id()
    arguments: dict[str, Any] = {"trip_id": "T-2", "_charter": {"requestId": rid}}
    async with Client(server, mode=mode) as client:
        first = await client.call_tool("cancel_trip", arguments)
        arguments["_charter"]["confirmed"] = True
        second = await client.call_tool("cancel_trip", arguments)
    assert first.is_error is True
    text = text_of(first)
    assert text.startswith("[CONFIRMATION_REQUIRED]")
    assert f'"_charter": {{"requestId": "{rid}", "confirmed": true}}' in text
    assert first.meta is not None
    paused = first.meta[OUTCOME_META_KEY]
    assert paused["kind"] == "interaction-required" and paused["gate"] == "confirmation"
    assert paused["continuation"] == {"request_id": rid, "confirmed": True, "approval_id": None}
    assert second.is_error is False
    assert probe.runs["cancel_trip"] == 1


async def test_an_approval_round_trip_through_the_ledger(
    server: Server[ConnectionState], host: Host, probe: Probe, mode: str
) -> None:
    rid = request_id()
    arguments: dict[str, Any] = {"trip_id": "T-3", "_charter": {"requestId": rid}}
    user = User(content={"confirm": True})
    async with Client(server, mode=mode, elicitation_callback=user) as client:
        pending = await client.call_tool("delete_trip", arguments)
        # The user confirmed; an approver is still needed, and the result says so.
        assert pending.is_error is True
        assert pending.meta is not None
        interaction = pending.meta[OUTCOME_META_KEY]["interaction"]
        approval_id = interaction["id"]
        assert interaction["metadata"]["code"] == ErrorCode.APPROVAL_REQUIRED.value
        assert text_of(pending).startswith("[APPROVAL_REQUIRED]")
        assert f"approvalId: {approval_id}" in text_of(pending)
        assert "Next steps:" in text_of(pending)

        granted = await host.approvals.grant(approval_id, BOB)
        assert isinstance(granted, ApprovalRecord)

        arguments["_charter"].update(approvalId=approval_id, confirmed=True)
        done = await client.call_tool("delete_trip", arguments)
        again = await client.call_tool("delete_trip", arguments)
    assert done.is_error is False
    assert done.structured_content == {"trip_id": "T-3", "status": "deleted"}
    assert again.structured_content == done.structured_content
    assert again.meta is not None and again.meta["charter/replayed"] is True
    assert probe.runs["delete_trip"] == 1
    assert len(user.asked) == 1


async def test_a_tools_question_is_asked_and_the_same_call_resumes_with_the_answer(
    server: Server[ConnectionState], probe: Probe, mode: str
) -> None:
    user = User(content={"name": "Ada"})
    async with Client(server, mode=mode, elicitation_callback=user) as client:
        result = await client.call_tool("ask_name", {})
    assert result.is_error is False
    assert result.structured_content == {"text": "Hello Ada"}
    assert user.asked[0].message == "What is your name?"
    assert user.asked[0].requested_schema["required"] == ["name"]
    [resume] = probe.resumes
    assert resume.interaction_id == "name-question"
    assert resume.kind == "response"
    assert resume.token == {"asked": "name"}


async def test_a_declined_question_resumes_the_call_with_no_answer(
    server: Server[ConnectionState], probe: Probe, mode: str
) -> None:
    async with Client(server, mode=mode, elicitation_callback=User("decline")) as client:
        result = await client.call_tool("ask_name", {})
    assert result.structured_content == {"text": "no name given"}
    assert probe.resumes[0].approved is False
    assert probe.resumes[0].value is None


async def test_without_elicitation_a_question_is_an_interaction_required_result(
    server: Server[ConnectionState], mode: str
) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("ask_name", {})
    error_text(result, "[INTERACTION_REQUIRED] What is your name?")


async def test_a_tool_samples_the_callers_model_over_a_back_channel(
    server: Server[ConnectionState],
) -> None:
    asked: list[types.CreateMessageRequestParams] = []

    async def model(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Paris"),
            model="test-model",
            stop_reason="endTurn",
        )

    async with Client(server, mode="legacy", sampling_callback=model) as client:
        result = await client.call_tool("ask_model", {"text": "Capital of France?"})
    assert result.structured_content == {"text": "Paris (test-model)"}
    [params] = asked
    assert params.max_tokens == 20
    assert params.system_prompt == "Be brief."
    message = params.messages[0]
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Capital of France?"


async def test_a_client_that_cannot_sample_gets_a_missing_service_error(
    server: Server[ConnectionState], mode: str
) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("ask_model", {"text": "hi"})
    assert "sampling" in error_text(result, "[MISSING_SERVICE]")


async def test_a_sampling_refusal_reaches_the_client_with_its_reason(
    server: Server[ConnectionState],
) -> None:
    async def refuse(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.ErrorData:
        return types.ErrorData(code=-1, message="user rejected")

    async with Client(server, mode="legacy", sampling_callback=refuse) as client:
        result = await client.call_tool("ask_model", {"text": "hi"})
    assert text_of(result).startswith("[PROVIDER_UNAVAILABLE] The client did not complete")
    assert "user rejected" in text_of(result)
