"""LangChain tools whose every call goes through ``Host.invoke`` (for LangGraph agents too).

``charter_tools(host, principal, session_id=...)`` returns one ``BaseTool`` per tool the
principal may call, with the tool's JSON Schema as ``args_schema``. A completed call
returns its validated output as JSON text; a failure or denial becomes an error
``ToolMessage`` (``status="error"``) with ``[CODE] message`` and next steps, so the agent
never crashes on a tool error.

Interactions: inside a LangGraph run, a call that needs a person calls LangGraph's
``interrupt()`` with the interaction, and ``Command(resume=...)`` answers it:
``True``/``False`` (or ``{"approved": bool}``) for an approval, ``{"value": ...}`` (or any
other value) for a response. LangGraph re-runs the tool from the top on resume, which is
harmless here: the host decides confirmation and approval before the handler runs, and
the ledger request id (session id + tool call id) makes a second or concurrent resume
replay the stored outcome instead of running the tool again. Outside a graph (or with
``interrupts=False``) the interaction comes back as an error message naming it.
Needs ``pip install 'charter[langchain]'`` (and ``langgraph`` for interrupts).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

try:
    from langchain_core.tools import BaseTool, ToolException
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "charter.integrations.langchain needs langchain-core: pip install 'charter[langchain]'"
    ) from exc
from pydantic import ConfigDict, SkipValidation

from .._redaction import redact
from .._wording import failure_text
from ..auth import Principal
from ..errors import ErrorCode
from ..harness.names import model_names
from ..harness.seal import model_controls_refused
from ..host import Host
from ..manifest import RegisteredTool
from ..outcome import Completed, Deferred, Denied, Failed, InteractionRequired, ToolOutcome
from ._calls import model_call, settle_model_call

__all__ = ("CharterTool", "charter_tools")

_MAX_INTERACTIONS = 8


def charter_tools(
    host: Host,
    principal: Principal | None,
    *,
    session_id: str,
    tools: list[str] | None = None,
    audience: str | None = None,
    interrupts: bool = True,
) -> list[CharterTool]:
    """LangChain tools for the host's tools that ``principal`` may call.

    Args:
        host: every call goes through ``host.invoke``.
        principal: the caller the agent acts for.
        session_id: a stable id of the conversation (the LangGraph thread id); with the
            tool call id it keys the ledger.
        tools: the names to offer; None offers every tool the principal may call.
        audience: the audience calls are made for.
        interrupts: pause the graph with ``interrupt()`` on interactions.

    Each tool is named by its model-facing name (``charter.harness.names``); calls run the
    canonical tool.

    Raises:
        ConfigurationError: two of the host's tools would have the same model-facing name.
    """
    names = model_names(host.registry.tools())
    return [
        CharterTool(
            name=names.model_name(t.name),
            description=t.tool.description,
            args_schema={k: v for k, v in t.tool.input_schema.items() if k != "$schema"},
            host=host,
            principal=principal,
            registered=t,
            session_id=session_id,
            audience=audience,
            interrupts=interrupts,
            handle_tool_error=True,
        )
        for t in host.callable_tools(principal, audience)
        if tools is None or t.name in tools
    ]


class CharterTool(BaseTool):
    """One host tool as a LangChain tool (build them with ``charter_tools``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    host: SkipValidation[Host]
    principal: SkipValidation[Principal | None]
    registered: SkipValidation[RegisteredTool]
    session_id: str
    audience: str | None = None
    interrupts: bool = True

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # The tool call id keys the ledger; LangChain does not hand it to _arun otherwise.
        _, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
        return (), {"arguments": kwargs, "call_id": tool_call_id}

    def _run(self, *args: Any, **kwargs: Any) -> str:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._arun(*args, **kwargs))
        raise RuntimeError("use ainvoke inside a running event loop")

    async def _arun(self, *args: Any, **kwargs: Any) -> str:
        arguments: dict[str, Any] = kwargs.get("arguments", {})
        reserved = model_controls_refused(arguments)
        if reserved is not None:
            return _content(reserved)
        call_id: str = kwargs.get("call_id") or uuid.uuid4().hex
        planned = model_call(
            self.principal,
            self.session_id,
            call_id,
            bridge="lc",
            audience=self.audience,
            model_name=self.name,
        )
        tool, controls, options = self.registered.name, planned.controls, planned.options
        outcome = await self.host.invoke(tool, arguments, self.principal, controls, call=options)
        for _ in range(_MAX_INTERACTIONS):
            if not isinstance(outcome, InteractionRequired | Deferred):
                return _content(outcome)
            answer = self._ask(outcome, planned.request_id)
            if isinstance(outcome, Deferred):
                settled = await settle_model_call(
                    self.host, self.registered, self.principal, planned.invocation_id, answer
                )
                return _content(settled)
            if outcome.interaction.kind == "approval":
                approved = answer.get("approved") if isinstance(answer, dict) else answer
                outcome = await self.host.resume(
                    outcome,
                    tool,
                    arguments,
                    self.principal,
                    approved=approved is True,
                    controls=controls,
                    call=options,
                )
            else:
                value = answer.get("value", answer) if isinstance(answer, dict) else answer
                outcome = await self.host.resume(
                    outcome,
                    tool,
                    arguments,
                    self.principal,
                    value=value,
                    controls=controls,
                    call=options,
                )
        raise ToolException(f"[{ErrorCode.ACTION_POLICY_REQUIRED.value}] Too many interactions.")

    def _ask(self, outcome: InteractionRequired | Deferred, request_id: str) -> Any:
        """Pause the graph on the interaction and return the resume value."""
        payload: dict[str, Any] = {"charter": outcome.kind, "tool": self.registered.name}
        payload["requestId"] = request_id
        if isinstance(outcome, InteractionRequired):
            payload.update(
                interactionId=outcome.interaction.id,
                kind=outcome.interaction.kind,
                gate=outcome.gate,
                prompt=outcome.interaction.prompt,
                approvalId=outcome.approval_id,
                approvalStatus=outcome.approval_status,
                nextSteps=list(outcome.next_steps),
            )
        else:
            payload["token"] = outcome.token
        if self.interrupts:
            try:
                from langgraph.types import interrupt
            except ImportError:
                pass
            else:
                try:
                    return interrupt(payload)
                except (RuntimeError, KeyError):
                    # Not inside a LangGraph run (no runnable context or no scratchpad).
                    pass
        raise ToolException(
            f"[{ErrorCode.APPROVAL_REQUIRED.value}] The call is waiting: "
            + json.dumps(payload, ensure_ascii=False)
        )


def _content(outcome: ToolOutcome) -> str:
    if isinstance(outcome, Completed):
        return json.dumps(outcome.output, ensure_ascii=False)
    if isinstance(outcome, Denied):
        raise ToolException(f"Denied: {outcome.reason}")
    assert isinstance(outcome, Failed)
    outcome = redact(outcome)  # the model reads it: server faults show their error id only
    if outcome.code is ErrorCode.AUTHORIZATION_DENIED:
        raise ToolException(f"Denied: {outcome.message}")
    raise ToolException(failure_text(outcome))
