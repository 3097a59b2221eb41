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

from ..auth import Principal
from ..context import ResumeInfo
from ..errors import ErrorCode
from ..host import CallOptions, Host
from ..manifest import RegisteredTool
from ..outcome import (
    Completed,
    Deferred,
    Denied,
    Failed,
    InteractionRequired,
    ToolOutcome,
)
from ..policy import InvocationControls
from ..registry import finish_output

__all__ = ("CharterTool", "charter_tools")

_NAMESPACE = uuid.UUID("3f0f6b1e-5a7c-4f0e-8d8b-2c7b6f2a9d44")
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
    """
    return [
        CharterTool(
            name=t.name,
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
        call_id: str = kwargs.get("call_id") or uuid.uuid4().hex
        request_id = uuid.uuid5(_NAMESPACE, f"{self.session_id}\x1f{call_id}")
        controls = InvocationControls(request_id=request_id)
        resume: ResumeInfo | None = None
        for _ in range(_MAX_INTERACTIONS):
            outcome = await self.host.invoke(
                self.name,
                arguments,
                self.principal,
                controls,
                call=CallOptions(
                    audience=self.audience,
                    session_id=self.session_id,
                    call_id=call_id,
                    invocation_id=f"lc_{call_id}",
                    resume=resume,
                ),
            )
            if not isinstance(outcome, InteractionRequired | Deferred):
                return _content(outcome)
            answer = self._ask(outcome, request_id)
            if isinstance(outcome, Deferred):
                # The resume value is the deferred work's output: validated like any other.
                settled = finish_output(self.registered, Completed(output=answer))
                await self.host.settle(f"lc_{call_id}", settled)
                return _content(settled)
            interaction = outcome.interaction
            if interaction.kind == "approval":
                approved = answer.get("approved") if isinstance(answer, dict) else answer
                if approved is not True:
                    raise ToolException("Denied: Approval rejected")
                gate = (interaction.metadata or {}).get("code")
                controls = InvocationControls(
                    request_id=request_id,
                    confirmed=True if gate is not None else None,
                    approval_id=interaction.id
                    if gate == ErrorCode.APPROVAL_REQUIRED.value
                    else controls.approval_id,
                )
                resume = ResumeInfo(
                    interaction_id=interaction.id,
                    kind="approval",
                    approved=True,
                    token=outcome.token,
                )
            else:
                value = answer.get("value", answer) if isinstance(answer, dict) else answer
                resume = ResumeInfo(
                    interaction_id=interaction.id, kind="response", value=value, token=outcome.token
                )
        raise ToolException(f"[{ErrorCode.ACTION_POLICY_REQUIRED.value}] Too many interactions.")

    def _ask(self, outcome: InteractionRequired | Deferred, request_id: uuid.UUID) -> Any:
        """Pause the graph on the interaction and return the resume value."""
        payload: dict[str, Any] = {"charter": outcome.kind, "tool": self.name}
        payload["requestId"] = str(request_id)
        if isinstance(outcome, InteractionRequired):
            payload.update(
                interactionId=outcome.interaction.id,
                kind=outcome.interaction.kind,
                prompt=outcome.interaction.prompt,
                metadata=outcome.interaction.metadata,
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
    if outcome.code is ErrorCode.AUTHORIZATION_DENIED:
        raise ToolException(f"Denied: {outcome.message}")
    raise ToolException(
        "\n".join([f"[{outcome.code.value}] {outcome.message}", *outcome.next_steps])
    )
