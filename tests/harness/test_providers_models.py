"""The Model adapters over the official SDK clients, served by an in-memory HTTP transport."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from harness_support import ALICE, World
from typed_params import assert_conforms, sdk

from charter.harness import AssistantMessage, Message, UserMessage
from charter.harness.providers import (
    AnthropicModel,
    OpenAIChatModel,
    anthropic_messages,
    gemini_contents,
    openai_messages,
)

pytestmark = pytest.mark.anyio


def transport(answers: list[dict[str, Any]], seen: list[dict[str, Any]], http: Any = httpx) -> Any:
    """Answer each request with the next canned JSON body; keep the request bodies.

    ``http`` is the HTTP package the SDK is built on (``httpx``, or ``httpx2`` for
    recent ``anthropic`` releases).
    """

    def handle(request: Any) -> Any:
        seen.append(json.loads(request.content))
        return http.Response(200, json=answers.pop(0))

    return http.MockTransport(handle)


def sdk_http() -> Any:
    """The HTTP package the SDKs are built on: ``httpx2`` in recent releases, else ``httpx``."""
    try:
        import httpx2
    except ImportError:
        return httpx
    return httpx2


def sdk_client(
    sdk: Callable[..., Any],
    base_url: str,
    answers: list[dict[str, Any]],
    seen: list[dict[str, Any]],
) -> Any:
    """An SDK client (``openai.AsyncOpenAI``, ...) whose requests get ``answers`` in turn."""
    http = sdk_http()
    return sdk(
        api_key="test",
        base_url=base_url,
        http_client=http.AsyncClient(transport=transport(answers, seen, http)),
    )


def chat_answer(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }


def anthropic_answer(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


async def test_a_harness_turn_over_the_openai_sdk(world: World) -> None:
    seen: list[dict[str, Any]] = []
    answers = [
        chat_answer(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 20, "b": 22}'},
                    }
                ],
            }
        ),
        chat_answer({"role": "assistant", "content": "42"}),
    ]
    openai = sdk("openai")
    client = sdk_client(openai.AsyncOpenAI, "http://openai.test/v1", answers, seen)
    model = OpenAIChatModel(client, model="gpt-test", instructions="Be brief.")
    result = await world.harness(model, tools=["add"], capabilities=()).session(ALICE).run("20+22?")

    assert (result.status, result.text) == ("completed", "42")
    first, second = seen
    assert first["messages"][0] == {"role": "system", "content": "Be brief."}
    (tool,) = first["tools"]
    assert tool["function"]["strict"] is True and tool["function"]["name"] == "add"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"sum":42}',
    }


async def test_a_harness_turn_over_the_anthropic_sdk(world: World) -> None:
    seen: list[dict[str, Any]] = []
    usage = {"input_tokens": 1, "output_tokens": 1}
    answers: list[dict[str, Any]] = [
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "tu_1", "name": "add", "input": {"a": 1, "b": "x"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": usage,
        },
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": "Sorry, bad input."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        },
    ]
    anthropic = sdk("anthropic")
    client = sdk_client(anthropic.AsyncAnthropic, "http://anthropic.test", answers, seen)
    model = AnthropicModel(client, model="claude-test", instructions="Be brief.")
    result = await world.harness(model, tools=["add"], capabilities=()).session(ALICE).run("1+x?")

    assert result.text == "Sorry, bad input."
    assert seen[0]["system"] == "Be brief." and seen[0]["tools"][0]["name"] == "add"
    (block,) = seen[1]["messages"][-1]["content"]
    assert (block["type"], block["tool_use_id"], block["is_error"]) == ("tool_result", "tu_1", True)
    assert block["content"].startswith(
        "[tool.invalid-arguments] b: Input should be a valid integer"
    )


async def test_an_openai_refusal_is_the_turns_text_and_the_session_runs_on(world: World) -> None:
    seen: list[dict[str, Any]] = []
    refusal = "I can't help with that."
    answers = [
        chat_answer({"role": "assistant", "content": None, "refusal": refusal}),
        chat_answer({"role": "assistant", "content": "42"}),
    ]
    openai = sdk("openai")
    client = sdk_client(openai.AsyncOpenAI, "http://openai.test/v1", answers, seen)
    session = world.harness(OpenAIChatModel(client, model="gpt-test")).session(ALICE)

    result = await session.run("Do something bad.")
    assert (result.status, result.text) == ("completed", refusal)
    await session.run("Then what is 20+22?")
    history = seen[1]["messages"]
    # Content is required unless the message has tool calls: the refusal is sent as it.
    assert history[1] == {"role": "assistant", "content": refusal}
    for message in history:
        assert_conforms(sdk("openai.types.chat").ChatCompletionMessageParam, message)


async def test_an_empty_anthropic_answer_is_left_out_of_the_next_request(world: World) -> None:
    seen: list[dict[str, Any]] = []
    answers = [anthropic_answer([]), anthropic_answer([{"type": "text", "text": "Hello."}])]
    anthropic = sdk("anthropic")
    client = sdk_client(anthropic.AsyncAnthropic, "http://anthropic.test", answers, seen)
    session = world.harness(AnthropicModel(client, model="claude-test")).session(ALICE)

    result = await session.run("Hi.")
    assert (result.status, result.text) == ("completed", None)
    await session.run("Hi again.")
    # The API refuses an assistant message with no content; two user turns are fine.
    assert seen[1]["messages"] == [
        {"role": "user", "content": "Hi."},
        {"role": "user", "content": "Hi again."},
    ]


SILENT_STEP: list[Message] = [
    UserMessage(content="Hi."),
    AssistantMessage(),
    UserMessage(content="Hi again."),
]
"""A transcript whose model step answered with neither text nor tool calls."""


@pytest.mark.parametrize(
    "convert",
    [
        openai_messages,
        lambda messages: openai_messages(messages, api="responses"),
        anthropic_messages,
        gemini_contents,
    ],
)
def test_no_format_sends_an_assistant_step_that_said_nothing(
    convert: Callable[[list[Message]], list[dict[str, Any]]],
) -> None:
    converted = convert(SILENT_STEP)
    assert len(converted) == 2 and all(m["role"] == "user" for m in converted)
