"""``Model`` adapters over the official SDK clients (passed in; nothing is imported here)."""

from __future__ import annotations

from typing import Any

from ..messages import ModelRequest, ModelResponse
from ._anthropic import anthropic_messages, anthropic_tool_calls, anthropic_tools
from ._openai import openai_messages, openai_tool_calls, openai_tools
from ._util import field

__all__ = ("AnthropicModel", "OpenAIChatModel")


class OpenAIChatModel:
    """A harness ``Model`` over Chat Completions: ``OpenAIChatModel(AsyncOpenAI(), model=...)``.

    Tools go out in strict mode by default (see ``strict_schema``; a tool strict mode
    cannot express goes out with ``strict: false``); the nulls strict mode makes the
    model send for left-out optional arguments are removed before sealing. A refusal
    is the answer's text.
    """

    def __init__(
        self,
        client: Any,
        *,
        model: str,
        instructions: str | None = None,
        strict: bool = True,
        **options: Any,
    ) -> None:
        """Wrap an ``openai.AsyncOpenAI`` client (or anything with its shape).

        Args:
            client: the SDK client; ``client.chat.completions.create`` is awaited.
            model: the model name.
            instructions: a system message put before the transcript.
            strict: send tools in strict mode.
            **options: passed to ``create`` (``temperature``, ``parallel_tool_calls``...).
        """
        self.client = client
        self.model = model
        self.instructions = instructions
        self.strict = strict
        self.options = options

    async def step(self, request: ModelRequest) -> ModelResponse:
        """One Chat Completions request."""
        messages = openai_messages(request.messages)
        if self.instructions:
            messages.insert(0, {"role": "system", "content": self.instructions})
        extra: dict[str, Any] = dict(self.options)
        if request.tools:
            extra["tools"] = openai_tools(request.tools, strict=self.strict)
        response = await self.client.chat.completions.create(
            model=self.model, messages=messages, **extra
        )
        message = field(field(response, "choices")[0], "message")
        return ModelResponse(
            # A refusal comes with content null: it is the assistant's answer.
            text=field(message, "content") or field(message, "refusal"),
            tool_calls=openai_tool_calls(message, tools=request.tools, strict=self.strict),
        )


class AnthropicModel:
    """A harness ``Model`` over the Messages API: ``AnthropicModel(AsyncAnthropic(), model=)``."""

    def __init__(
        self,
        client: Any,
        *,
        model: str,
        max_tokens: int = 1024,
        instructions: str | None = None,
        **options: Any,
    ) -> None:
        """Wrap an ``anthropic.AsyncAnthropic`` client (or anything with its shape).

        Args:
            client: the SDK client; ``client.messages.create`` is awaited.
            model: the model name.
            max_tokens: the answer's token limit.
            instructions: the system prompt.
            **options: passed to ``create``.
        """
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.instructions = instructions
        self.options = options

    async def step(self, request: ModelRequest) -> ModelResponse:
        """One Messages API request."""
        extra: dict[str, Any] = dict(self.options)
        if request.tools:
            extra["tools"] = anthropic_tools(request.tools)
        if self.instructions:
            extra["system"] = self.instructions
        message = await self.client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            messages=anthropic_messages(request.messages),
            **extra,
        )
        texts = [
            str(field(block, "text", ""))
            for block in field(message, "content", ()) or ()
            if field(block, "type") == "text"
        ]
        return ModelResponse(text="".join(texts) or None, tool_calls=anthropic_tool_calls(message))
