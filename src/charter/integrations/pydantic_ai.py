"""A pydantic-ai toolset whose every call goes through ``Host.invoke``.

Outcomes map onto pydantic-ai's own control flow:

| charter outcome                          | pydantic-ai                                         |
|------------------------------------------|-----------------------------------------------------|
| ``Completed``                            | the tool's return value (validated output)          |
| ``Denied`` / ``AUTHORIZATION_DENIED``    | ``ToolFailed("Denied: ...")`` (terminal)            |
| ``Failed`` with ``INVALID_INPUT``        | ``ModelRetry`` (the model fixes its arguments)      |
| ``Failed``, retryable                    | ``ModelRetry``                                      |
| ``Failed``, not retryable                | ``ToolFailed("[CODE] message")``                    |
| ``InteractionRequired`` (approval)       | ``ApprovalRequired(metadata)``                      |
| ``InteractionRequired`` (response)       | ``CallDeferred(metadata, kind="question")``         |
| ``Deferred``                             | ``CallDeferred(metadata, kind="external")``         |

A deferred call's result goes back through ``CharterToolset.settle``, which validates it
and settles the host's record: pydantic-ai never calls the toolset for it.

Each call's ledger request id is derived from the toolset's session id and the model's
tool call id (``charter.host.derive_request_id``), which pydantic-ai keeps across
``DeferredToolResults``. So resuming the same approval twice (or replaying the persisted
history) replays the stored outcome instead of running the tool again, and the approval
the host checks is bound to the call's exact arguments and request id. The approval
request's metadata carries the host's pause; an approved call continues it with
``Host.resume`` (without the metadata, the pause the call answers with now: a host gate,
or the handler's own approval request). Needs ``pip install 'charter[pydantic-ai]'``.
"""

from __future__ import annotations

import uuid
from typing import Any

try:
    from pydantic_ai import RunContext
    from pydantic_ai.exceptions import (
        ApprovalRequired,
        CallDeferred,
        ModelRetry,
        ToolFailed,
    )
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "charter.integrations.pydantic_ai needs pydantic-ai: pip install 'charter[pydantic-ai]'"
    ) from exc
from pydantic import ValidationError
from pydantic_core import SchemaValidator, core_schema

from .._redaction import redact
from .._wording import failure_text
from ..auth import Principal
from ..errors import ErrorCode
from ..harness.names import ModelNames, model_names
from ..harness.seal import model_controls_refused
from ..host import Host
from ..manifest import RegisteredTool
from ..outcome import Completed, Deferred, Denied, Failed, InteractionRequired, ToolOutcome
from ._calls import model_call, settle_model_call

__all__ = ("CharterToolset",)

_ANY = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))
_PAUSED_KEY = "charterPause"
"""The metadata key holding the host's ``InteractionRequired``, for ``Host.resume``."""


class CharterToolset(AbstractToolset[Any]):
    """The host's tools for a pydantic-ai ``Agent``, called as ``principal``."""

    def __init__(
        self,
        host: Host,
        principal: Principal | None,
        *,
        session_id: str,
        tools: list[str] | None = None,
        audience: str | None = None,
        id: str | None = "charter",
        max_retries: int = 1,
    ) -> None:
        """Offer the host's tools to an agent.

        Args:
            host: every call goes through ``host.invoke``.
            principal: the caller the agent acts for.
            session_id: a stable id of the conversation (keep it across deferred-result
                resumes); with the tool call id it keys the ledger.
            tools: the tool names to offer; None offers every tool the principal may call.
            audience: the audience calls are made for.
            id: the toolset id pydantic-ai reports.
            max_retries: pydantic-ai's retry budget per tool.

        Raises:
            ConfigurationError: two of the host's tools would have the same model-facing
                name (``charter.harness.names``).
        """
        model_names(host.registry.tools())  # a name collision fails here, not mid-run
        self.host = host
        self.principal = principal
        self.session_id = session_id
        self.names = tools
        self.audience = audience
        self._id = id
        self.max_retries = max_retries

    @property
    def id(self) -> str | None:
        """The toolset id."""
        return self._id

    def _tools(self) -> list[RegisteredTool]:
        visible = self.host.callable_tools(self.principal, self.audience)
        return [t for t in visible if self.names is None or t.name in self.names]

    def _names(self) -> ModelNames:
        # The whole registry's names: a tool is called the same whoever the principal is.
        return model_names(self.host.registry.tools())

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tools the principal may call, by model-facing name, with their input schemas."""
        names = self._names()
        return {
            names.model_name(t.name): ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=names.model_name(t.name),
                    description=t.tool.description,
                    parameters_json_schema={
                        k: v for k, v in t.tool.input_schema.items() if k != "$schema"
                    },
                ),
                max_retries=self.max_retries,
                # The host validates (once, under its payload limits); this only checks
                # that the model sent an object.
                args_validator=_ANY,
            )
            for t in self._tools()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Invoke the tool through the host and map its outcome (see the module table)."""
        reserved = model_controls_refused(tool_args)
        if reserved is not None:
            return _failed(reserved)
        called = name
        name = self._names().tool_name(called) or called
        call_id = ctx.tool_call_id or uuid.uuid4().hex
        planned = model_call(
            self.principal,
            self.session_id,
            call_id,
            bridge="pai",
            audience=self.audience,
            model_name=called,
        )
        request_id, controls, options = planned.request_id, planned.controls, planned.options
        if not ctx.tool_call_approved:
            outcome = await self.host.invoke(
                name, tool_args, self.principal, controls, call=options
            )
            return _map(outcome, request_id)
        # The person approved: continue the host's pause (from the approval request's
        # metadata when the caller passed it back, else as the call answers now), through
        # the confirmation and an approval an approver already granted.
        paused = _paused(ctx)
        if paused is None:
            outcome = await self.host.invoke(
                name, tool_args, self.principal, controls, call=options
            )
            # The pause the call answers with now may be the handler's own approval
            # request: the person approved that one (a host gate passes in the loop).
            paused = _handler_approval(outcome)
        if paused is not None:
            outcome = await self.host.resume(
                paused, name, tool_args, self.principal, controls=controls, call=options
            )
        for _ in range(2):
            if not _continuable(outcome):
                break
            assert isinstance(outcome, InteractionRequired)
            outcome = await self.host.resume(
                outcome, name, tool_args, self.principal, controls=controls, call=options
            )
        return _map(outcome, request_id)

    async def settle(self, call: ToolCallPart, output: object) -> Any:
        """The value for ``DeferredToolResults.calls`` of a deferred call whose work ended.

        pydantic-ai hands a deferred call's result to the model without calling the toolset
        again, so pass it through here: ``output`` is validated against the tool's output
        model and stored as the host's deferred record's outcome (once, as the principal's
        tenant), like the harness and the LangChain bridge settle theirs.

        Args:
            call: the call, from ``DeferredToolRequests.calls``.
            output: what the work produced, as the handler would have returned it.

        Returns:
            The validated output; or, when it is refused (it breaks the output model, the
            call was already settled), the ``ToolFailed`` or ``ModelRetry`` that tells the
            model why, to pass back as it is.
        """
        name = self._names().tool_name(call.tool_name) or call.tool_name
        registered = self.host.registry.get(name)
        if registered is None:
            return ToolFailed(f"[{ErrorCode.NOT_FOUND.value}] No tool {call.tool_name!r}.")
        planned = model_call(
            self.principal,
            self.session_id,
            call.tool_call_id,
            bridge="pai",
            audience=self.audience,
            model_name=call.tool_name,
        )
        outcome = await settle_model_call(
            self.host, registered, self.principal, planned.invocation_id, output
        )
        try:
            return _map(outcome, planned.request_id)
        except (ToolFailed, ModelRetry) as refused:
            return refused


def _continuable(outcome: ToolOutcome) -> bool:
    """A host gate an approving person can pass now (an ungranted approval is not)."""
    return (
        isinstance(outcome, InteractionRequired)
        and outcome.gate != "handler"
        and outcome.approval_status in (None, "approved")
    )


def _handler_approval(outcome: ToolOutcome) -> InteractionRequired | None:
    """The handler's own approval request, if that is the outcome."""
    if (
        isinstance(outcome, InteractionRequired)
        and outcome.gate == "handler"
        and outcome.interaction.kind == "approval"
    ):
        return outcome
    return None


def _paused(ctx: RunContext[Any]) -> InteractionRequired | None:
    """The host's pause this toolset put in the approval request's metadata, if any."""
    metadata = ctx.tool_call_metadata
    raw = metadata.get(_PAUSED_KEY) if isinstance(metadata, dict) else None
    try:
        return InteractionRequired.model_validate(raw) if raw is not None else None
    except ValidationError:
        return None


def _map(outcome: ToolOutcome, request_id: str) -> Any:
    if isinstance(outcome, Completed):
        return outcome.output
    if isinstance(outcome, Denied):
        raise ToolFailed(f"Denied: {outcome.reason}")
    if isinstance(outcome, InteractionRequired):
        interaction = outcome.interaction
        metadata: dict[str, Any] = {
            "interactionId": interaction.id,
            "prompt": interaction.prompt,
            "requestId": request_id,
            "gate": outcome.gate,
            "approvalId": outcome.approval_id,
            "nextSteps": list(outcome.next_steps),
            _PAUSED_KEY: outcome.model_dump(mode="json"),
        }
        if interaction.kind == "approval":
            raise ApprovalRequired(metadata)
        raise CallDeferred(metadata, kind="question")
    if isinstance(outcome, Deferred):
        token = outcome.token if isinstance(outcome.token, dict) else {"token": outcome.token}
        raise CallDeferred({"requestId": request_id, **token}, kind="external")
    return _failed(outcome)


def _failed(outcome: Failed) -> Any:
    outcome = redact(outcome)  # the model reads it: server faults show their error id only
    if outcome.code is ErrorCode.AUTHORIZATION_DENIED:
        raise ToolFailed(f"Denied: {outcome.message}")
    text = failure_text(outcome)
    if outcome.code is ErrorCode.INVALID_INPUT or outcome.retryable:
        raise ModelRetry(text)
    raise ToolFailed(text)
