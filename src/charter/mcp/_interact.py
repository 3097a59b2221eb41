"""Talking back to the client during a call: elicitation, sampling, logging.

A handshake-era connection with a back-channel (stdio, stateful streamable HTTP) gets
server-to-client requests mid-call. A 2026-07-28 connection cannot be called back, so
an elicitation becomes an ``InputRequiredResult`` whose sealed ``requestState`` says
how to continue when the client retries the call with the user's answer.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp.types as types
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..context import LogLevel, LogSink, Sampler, SampleRequest, SampleResult
from ..errors import ErrorCode, ToolError
from ..outcome import InteractionRequired

__all__ = (
    "ELICITATION_KEY",
    "Ask",
    "ConnectionState",
    "ask_for",
    "decode_ask",
    "elicitation_channel",
    "log_sink",
    "sampler",
)

ELICITATION_KEY = "charter/elicitation"
"""The key of charter's elicitation in an ``InputRequiredResult``'s ``inputRequests``."""

_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

_CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {
            "type": "boolean",
            "title": "Confirm",
            "description": "Allow this action to run.",
            "default": False,
        }
    },
    "required": ["confirm"],
}

_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "title": "Answer"}},
    "required": ["answer"],
}


@dataclass(kw_only=True)
class ConnectionState:
    """What the adapter remembers per connection (the server's lifespan state).

    stdio and in-memory connections each enter the lifespan; streamable HTTP enters
    it once, so HTTP sessions are told apart by their ``Mcp-Session-Id``.
    """

    log_levels: OrderedDict[str | None, types.LoggingLevel] = field(default_factory=OrderedDict)
    max_sessions: int = 10_000

    def set_level(self, key: str | None, level: types.LoggingLevel) -> None:
        """Remember the minimum log level a session asked for (``logging/setLevel``)."""
        self.log_levels[key] = level
        self.log_levels.move_to_end(key)
        while len(self.log_levels) > self.max_sessions:
            self.log_levels.popitem(last=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class Ask:
    """A question the user can answer mid-call, and the pause it continues."""

    kind: Literal["confirm", "response"]
    message: str
    schema: dict[str, Any]
    paused: InteractionRequired
    """What the host answered; ``Host.resume`` continues it with the user's answer."""

    def state(self) -> str:
        """The ``requestState`` plaintext (the SDK seals it before it leaves the server)."""
        return json.dumps(
            {
                "v": 2,
                "k": self.kind,
                "m": self.message,
                "p": self.paused.model_dump(mode="json"),
            }
        )


def decode_ask(state: str) -> Ask | None:
    """Read an ``Ask`` back from a ``requestState`` this server minted."""
    try:
        data = json.loads(state)
        kind, message = data["k"], data["m"]
        paused = InteractionRequired.model_validate(data["p"])
    except (ValueError, KeyError, TypeError, ValidationError):
        return None
    if data.get("v") != 2 or kind not in ("confirm", "response") or not isinstance(message, str):
        return None
    return Ask(kind=kind, message=message, schema={}, paused=paused)


def ask_for(outcome: InteractionRequired) -> Ask | None:
    """The question a user can answer for ``outcome``; None when only an approver can."""
    interaction = outcome.interaction
    if outcome.gate == "handler" and interaction.kind == "response":
        schema = (interaction.metadata or {}).get("schema")
        return Ask(
            kind="response",
            message=interaction.prompt,
            schema=schema if isinstance(schema, dict) else _ANSWER_SCHEMA,
            paused=outcome,
        )
    if outcome.gate != "confirmation":
        return None
    return Ask(kind="confirm", message=interaction.prompt, schema=_CONFIRM_SCHEMA, paused=outcome)


def elicitation_channel(
    ctx: ServerRequestContext[Any, Any],
) -> Literal["push", "input-required"] | None:
    """How this client can be asked mid-call, if it can (form-mode elicitation)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        return None
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return "input-required"
    return "push" if ctx.session.can_send_request else None


async def elicit(ctx: ServerRequestContext[Any, Any], ask: Ask) -> types.ElicitResult | None:
    """Ask the user over the back-channel; None when the client cannot or would not answer."""
    try:
        return await ctx.session.elicit_form(
            ask.message, ask.schema, related_request_id=ctx.request_id
        )
    except (MCPError, NoBackChannelError, ValidationError):
        return None


def input_required(ask: Ask) -> types.InputRequiredResult:
    """The 2026-07-28 form of an elicitation: the client retries with the answer."""
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=ask.message, requested_schema=ask.schema)
    )
    return types.InputRequiredResult(
        input_requests={ELICITATION_KEY: request}, request_state=ask.state()
    )


def log_sink(
    ctx: ServerRequestContext[ConnectionState, Any], session_key: str | None, logger: str
) -> LogSink:
    """Turn ``ctx.log`` into ``notifications/message`` on this request's stream."""
    allowed = allowed_log_levels(ctx.protocol_version, ctx.meta)
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        minimum = ctx.lifespan_context.log_levels.get(session_key, "debug")
        allowed = frozenset(_LEVELS[_LEVELS.index(minimum) :])

    async def log(level: LogLevel, message: str, data: Mapping[str, Any] | None) -> None:
        if level not in allowed:
            return
        payload: Any = message if data is None else {"message": message, "data": dict(data)}
        await ctx.session.send_notification(
            types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(
                    level=level, data=payload, logger=logger
                )
            ),
            related_request_id=ctx.request_id,
        )

    return log


def sampler(ctx: ServerRequestContext[Any, Any]) -> Sampler | None:
    """A ``Sampler`` over ``sampling/createMessage``, when this client can be asked."""
    capabilities = ctx.session.client_capabilities
    if (
        capabilities is None
        or capabilities.sampling is None
        or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        or not ctx.session.can_send_request
    ):
        return None

    async def sample(request: SampleRequest) -> SampleResult:
        message = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=[
                    types.SamplingMessage(
                        role=role, content=types.TextContent(type="text", text=text)
                    )
                    for role, text in request.messages
                ],
                max_tokens=request.max_tokens,
                system_prompt=request.system_prompt,
                temperature=request.temperature,
            )
        )
        try:
            result = await ctx.session.send_request(
                message,
                types.CreateMessageResult,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        except MCPError as exc:
            # The client's answer, not a server fault: PROVIDER_ERROR's text would be
            # withheld from the very client that sent it (charter._redaction).
            raise ToolError(
                ErrorCode.PROVIDER_UNAVAILABLE,
                f"The client did not complete the sampling request: {exc.error.message}",
                retryable=False,
                meta={"reason": "sampling_failed"},
            ) from exc
        except (NoBackChannelError, ValidationError) as exc:
            raise ToolError(
                ErrorCode.PROVIDER_UNAVAILABLE,
                "The client could not be asked for a completion.",
                meta={"reason": "sampling_unavailable"},
            ) from exc
        content = result.content
        if not isinstance(content, types.TextContent):
            raise ToolError(
                ErrorCode.PROVIDER_UNAVAILABLE,
                f"The client's model answered with {content.type} content; text was expected.",
                retryable=False,
                meta={"reason": "sampling_not_text"},
            )
        return SampleResult(text=content.text, model=result.model, stop_reason=result.stop_reason)

    return sample
