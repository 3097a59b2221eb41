"""The callers of the X04 protocol scenario: one for each way a caller reaches the host.

A ``ProtocolCaller`` makes the scenario's moves through its transport, as the travel
demo's agent (``traveller-agent``) and approver (``staff-approver``), and normalises what
its caller was shown into a ``Seen``:

- ``call(request, tool, arguments, confirmed=…, approval=…)``: the agent makes a call as the
  request labelled ``request``; ``confirmed``: the user confirmed it; ``approval``: it goes
  ahead under that approval.
- ``decide(approval_id, grant=…, reason=…)``: the approver grants or denies an approval.
- ``request_approval(request, tool, arguments)``: the agent asks approval of a call first
  (the ``request_action_approval`` tool, or ``Host.request_approval`` in process).

In process, over REST, MCP and the CLI the caller sends the controls itself (``_charter``
in the arguments, or the CLI's ``--request-id``, ``--confirm``, ``--approval`` headers).
The harness and the bridges never let their caller send controls: each call's request id
is derived from a session id and a call id (``charter.host.derive_request_id``), a paused
call continues through ``Host.resume`` when its caller approves, and their approver
decides through ``host.approvals``. Each of those callers says in comments how it makes
each move, and ``shows`` says what its caller (a model) can read of an outcome.
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _transports import (
    AGENT,
    APPROVER,
    GATE_CODES,
    HttpCaller,
    McpCaller,
    Seen,
    TravelSite,
    approval_seen,
    mcp_http_caller,
    mcp_stdio_caller,
    run_charter,
    seen_from_approval,
    seen_from_approval_body,
    seen_from_http,
    seen_from_mcp,
    seen_from_outcome,
)
from examples.travel import build_host
from tests.builders import fake_tool_model

from charter import Host, Principal
from charter.auth import Credentials
from charter.harness import (
    Approve,
    Harness,
    MemorySessionStore,
    ModelResponse,
    PendingInteraction,
    ResumeCodes,
    Session,
    ToolCall,
    ToolResult,
    TurnResult,
    result_text,
)
from charter.harness.names import model_name_for
from charter.harness.testing import ScriptedModel
from charter.host import derive_request_id
from charter.ledger import ApprovalRecord
from charter.outcome import outcome_adapter
from charter.store import SqlStore

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.messages import ModelResponse as PaiResponse
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.tools import DeferredToolRequests

# The pydantic-ai and LangChain callers import their framework when they are built, not at
# collection: importing both costs every pytest-xdist worker about 1.5 s of CPU.

__all__ = (
    "TRANSPORTS",
    "ProtocolCaller",
    "ProtocolSite",
    "full_view",
    "harness_view",
    "model_view",
    "open_caller",
)

TRANSPORTS = (
    "in-process",
    "rest",
    "mcp-http",
    "mcp-stdio",
    "cli",
    "harness",
    "pydantic-ai",
    "langchain",
)


@dataclass(frozen=True, kw_only=True)
class ProtocolSite:
    """The travel demo on one database: its live site (REST, MCP) and its demo keys."""

    db_url: str
    keys: dict[str, str]
    keys_file: Path
    site: TravelSite


@dataclass(frozen=True)
class Move:
    """A call the agent makes, as ``ProtocolCaller.call`` was given it."""

    request: str
    tool: str
    arguments: dict[str, Any]
    confirmed: bool = False
    approval: str | None = None


class ProtocolCaller:
    """Makes the scenario's moves over one transport (see the module docstring).

    A transport's caller implements ``make`` (the agent's call), ``decide`` and
    ``request_approval``.
    """

    name: str

    def shows(self, seen: Seen) -> Seen:
        """What this transport's caller can read of an outcome (the rest it never sees)."""
        return full_view(seen)

    def request_ids(self) -> dict[str, str]:
        """The request id each request label stood for."""
        raise NotImplementedError

    async def call(
        self,
        request: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        confirmed: bool = False,
        approval: str | None = None,
    ) -> Seen:
        """The agent makes a call as the request labelled ``request``."""
        return await self.make(Move(request, tool, arguments, confirmed, approval))

    async def make(self, move: Move) -> Seen:
        """Make ``move`` over this transport; what its caller was shown."""
        raise NotImplementedError

    async def decide(self, approval_id: str, *, grant: bool, reason: str | None = None) -> Seen:
        """The approver grants or denies an approval."""
        raise NotImplementedError

    async def request_approval(self, request: str, tool: str, arguments: dict[str, Any]) -> Seen:
        """The agent asks approval of a call first."""
        raise NotImplementedError


# -- what a caller can read -----------------------------------------------------------------


def full_view(seen: Seen) -> Seen:
    """In process, REST, MCP and the CLI show every fact of an outcome."""
    return seen


def harness_view(seen: Seen) -> Seen:
    """What a model reads through the harness.

    A person's denial and an ``AUTHORIZATION_DENIED`` failure are both a ``denied`` result
    whose text says why: no cause, no code, only what the text names (the approval, who
    denied it and their reason). A failure shows its charter code and reason (in its
    ``details``), a completed call whether it was replayed.
    """
    if seen.kind == "denied" or (seen.kind == "failed" and seen.code == "AUTHORIZATION_DENIED"):
        named = seen.decided_by is not None
        return Seen(
            kind="denied",
            approval_id=seen.approval_id if named else None,
            decided_by=seen.decided_by,
            decision_reason=seen.decision_reason,
        )
    return seen


def model_view(seen: Seen) -> Seen:
    """What a model reads through the pydantic-ai and LangChain bridges.

    As through the harness, and a failure is its text ``[CODE] message`` (no reason), and a
    completed call is its output alone (no replay marker): the replays are proven from
    the audit trail instead.
    """
    seen = harness_view(seen)
    if seen.kind in ("failed", "completed"):
        return replace(seen, reason=None, replayed=False)
    return seen


_DENIAL = re.compile(
    r"A person \((?P<by>[^)]+)\) denied approval (?P<approval>\S+) for '[^']*'"
    r"(?:: (?P<why>.*?))?\. This request will not run"
)
_CODE = re.compile(r"\[(?P<code>[A-Z_]+)\]")


def seen_from_model_text(text: str) -> Seen:
    """A failure as a model reads it through the harness or a bridge, normalised.

    ``Denied: …`` is a denial (a person's names who and why); ``[CODE] message`` a failure.
    """
    if text.startswith("Denied: "):
        person = _DENIAL.search(text)
        if person is None:
            return Seen(kind="denied")
        return Seen(
            kind="denied",
            approval_id=person["approval"],
            decided_by=person["by"],
            decision_reason=person["why"],
        )
    code = _CODE.search(text)
    return Seen(kind="failed", code=code["code"] if code else f"unreadable: {text[:200]}")


def seen_paused(gate: str | None, approval_id: str | None) -> Seen:
    """A call paused at a host gate, as every transport names it."""
    return Seen(
        kind="interaction-required",
        gate=gate,
        code=GATE_CODES.get(gate or ""),
        approval_id=approval_id if gate == "approval" else None,
    )


def charter_controls(request_id: str, confirmed: bool, approval: str | None) -> dict[str, Any]:
    """The ``_charter`` controls of a call (what REST and MCP callers send)."""
    controls: dict[str, Any] = {"requestId": request_id}
    if confirmed:
        controls["confirmed"] = True
    if approval is not None:
        controls["approvalId"] = approval
    return {"_charter": controls}


class _RequestIds:
    """Request ids by label, each a UUID the caller makes up once (as a client does)."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}

    def __call__(self, label: str) -> str:
        return self.ids.setdefault(label, str(uuid.uuid4()))


class _SendsControls(ProtocolCaller):
    """A caller that sends the controls itself, under request ids it makes up."""

    def __init__(self) -> None:
        self.request = _RequestIds()

    def request_ids(self) -> dict[str, str]:
        return dict(self.request.ids)

    async def make(self, move: Move) -> Seen:
        controls = charter_controls(self.request(move.request), move.confirmed, move.approval)
        return await self.send(move.tool, {**move.arguments, **controls})

    async def request_approval(self, request: str, tool: str, arguments: dict[str, Any]) -> Seen:
        asked = {"tool": tool, "arguments": arguments, "request_id": self.request(request)}
        return await self.send("request_action_approval", asked)

    async def send(self, tool: str, arguments: dict[str, Any]) -> Seen:
        """The agent's call of ``tool`` with ``arguments`` (controls and all)."""
        raise NotImplementedError


async def decide_at_host(
    host: Host, approver: Principal, approval_id: str, grant: bool, reason: str | None
) -> Seen:
    """The approver's decision through ``host.approvals`` (a person, not a model)."""
    decide = host.approvals.grant if grant else host.approvals.deny
    return seen_from_approval(await decide(approval_id, approver, reason))


class _ModelCaller(ProtocolCaller):
    """The harness and the bridges: a model makes the calls, under derived request ids
    (``ids``, learnt as they are made); the approver decides through ``host.approvals``."""

    def __init__(self, host: Host, agent: Principal, approver: Principal) -> None:
        self.host, self.agent, self.approver = host, agent, approver
        self.ids: dict[str, str] = {}
        self.made_up = _RequestIds()

    def shows(self, seen: Seen) -> Seen:
        return model_view(seen)

    def request_ids(self) -> dict[str, str]:
        return {**self.made_up.ids, **self.ids}

    async def decide(self, approval_id: str, *, grant: bool, reason: str | None = None) -> Seen:
        return await decide_at_host(self.host, self.approver, approval_id, grant, reason)

    def asked(self, request: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """What the model gives the approval tool: the call, under a request id it made up."""
        return {"tool": tool, "arguments": arguments, "request_id": self.made_up(request)}


# -- in process -----------------------------------------------------------------------------


class InProcessCaller(_SendsControls):
    """``Host.invoke``, ``host.approvals`` and ``Host.request_approval`` on a host in this loop."""

    name = "in-process"

    def __init__(self, host: Host, agent: Principal, approver: Principal) -> None:
        super().__init__()
        self.host, self.agent, self.approver = host, agent, approver

    async def send(self, tool: str, arguments: dict[str, Any]) -> Seen:
        return seen_from_outcome(await self.host.invoke(tool, arguments, self.agent))

    async def decide(self, approval_id: str, *, grant: bool, reason: str | None = None) -> Seen:
        return await decide_at_host(self.host, self.approver, approval_id, grant, reason)

    async def request_approval(self, request: str, tool: str, arguments: dict[str, Any]) -> Seen:
        asked = await self.host.request_approval(
            tool, arguments, self.agent, request_id=self.request(request)
        )
        if isinstance(asked, ApprovalRecord):
            return seen_from_approval(asked)
        return seen_from_outcome(asked)


# -- REST -----------------------------------------------------------------------------------


class RestCaller(_SendsControls):
    """``POST /v1/tools/{name}:call`` (``_charter`` in the body), ``/v1/approvals/{id}:grant``."""

    name = "rest"

    def __init__(self, http: HttpCaller) -> None:
        super().__init__()
        self.http = http

    async def send(self, tool: str, arguments: dict[str, Any]) -> Seen:
        return seen_from_http(await self.http.post(AGENT, tool, arguments))

    async def decide(self, approval_id: str, *, grant: bool, reason: str | None = None) -> Seen:
        response = await self.http.decide(APPROVER, approval_id, grant=grant, reason=reason)
        if response.status_code != 200:
            return seen_from_http(response)
        return seen_from_approval_body(response.json())


# -- MCP ------------------------------------------------------------------------------------


class McpProtocolCaller(_SendsControls):
    """``tools/call`` through the SDK client; the approver uses the approval tools."""

    def __init__(self, mcp: McpCaller) -> None:
        super().__init__()
        self.name = mcp.name
        self.mcp = mcp

    async def send(self, tool: str, arguments: dict[str, Any]) -> Seen:
        return await self.mcp.call(AGENT, tool, arguments)

    async def decide(self, approval_id: str, *, grant: bool, reason: str | None = None) -> Seen:
        client = await self.mcp.client(APPROVER)
        tool = "approve_action_approval" if grant else "deny_action_approval"
        # The person confirms their decision (the tools require it).
        sent: dict[str, Any] = {"approval_id": approval_id, "_charter": {"confirmed": True}}
        if reason is not None:
            sent["reason"] = reason
        result = await client.call_tool(tool, sent)
        if result.is_error or result.structured_content is None:
            return seen_from_mcp(result)
        view = result.structured_content  # the tool's ApprovalView
        return approval_seen(
            view["approval_id"], view["status"], view.get("decided_by"), view.get("reason")
        )


# -- the CLI --------------------------------------------------------------------------------

EXIT_STATUS = {"completed": 0, "failed": 1, "interaction-required": 3, "denied": 4}
"""``charter call``'s exit status for each kind of outcome (docs: 0, 1, 3 pending, 4 denied)."""


class CliCaller(_SendsControls):
    """``charter call --url`` and ``charter approvals grant|deny --url`` (``run_charter``).

    The controls go as options (sent as the ``Idempotency-Key``, ``Charter-Confirm`` and
    ``Charter-Approval`` headers); ``--json`` prints the outcome, read here with the exit
    status, which must be the one documented for its kind.
    """

    name = "cli"

    def __init__(self, url: str, keys: dict[str, str]) -> None:
        super().__init__()
        self.url, self.keys = url, keys

    async def make(self, move: Move) -> Seen:
        options = ["--request-id", self.request(move.request)]
        if move.confirmed:
            options.append("--confirm")
        if move.approval is not None:
            options += ["--approval", move.approval]
        return await self._call(move.tool, move.arguments, options)

    async def decide(self, approval_id: str, *, grant: bool, reason: str | None = None) -> Seen:
        options = ["--reason", reason] if reason is not None else []
        done = await run_charter(
            "approvals",
            "grant" if grant else "deny",
            approval_id,
            "--url",
            self.url,
            "--key",
            self.keys[APPROVER],
            "--json",
            *options,
        )
        if done.exit_code != 0:
            return Seen(kind=f"exit {done.exit_code}", reason=done.stdout[-500:])
        return seen_from_approval_body(json.loads(done.stdout))

    async def send(self, tool: str, arguments: dict[str, Any]) -> Seen:
        return await self._call(tool, arguments, [])

    async def _call(self, tool: str, arguments: dict[str, Any], options: list[str]) -> Seen:
        done = await run_charter(
            "call",
            "--url",
            self.url,
            tool,
            "--args",
            json.dumps(arguments),
            "--key",
            self.keys[AGENT],
            "--json",
            *options,
        )
        seen = seen_from_outcome(outcome_adapter.validate_json(done.stdout))
        if EXIT_STATUS.get(seen.kind) != done.exit_code:
            # The outcome is right but the exit status is not the documented one for it.
            return replace(seen, kind=f"{seen.kind} (exit {done.exit_code})")
        return seen


# -- the harness ----------------------------------------------------------------------------


class HarnessCaller(_ModelCaller):
    """A ``charter.harness`` session per request, its model scripted (``ScriptedModel``).

    The harness derives a call's request id from the session id and the invocation id it
    mints (``Harness(new_id=…)``). Every run and resume here is a fresh ``Harness`` (a new
    process) whose id source starts over on a shared session store, so the same call made
    again in a session gets the same invocation id and so the same request id: the
    harness's exact retry, as when a process re-runs a step it had not saved. Moves:

    - a call: the model makes it in a new turn of the request's session;
    - ``confirmed``: the user approves the confirmation pause (``Approve``), which the
      harness continues with ``Host.resume``; a retry of a confirmation-only tool pauses at
      the confirmation gate again (the host checks confirmation before the ledger), and is
      approved like the first call;
    - ``approval=A``: the app resumes the session with ``Approve(interaction_id=A)``;
    - the approver decides through ``host.approvals`` (a person, not a model).
    """

    name = "harness"

    def __init__(self, host: Host, agent: Principal, approver: Principal) -> None:
        super().__init__(host, agent, approver)
        self.store = MemorySessionStore()
        self.paused: dict[str, TurnResult] = {}

    def shows(self, seen: Seen) -> Seen:
        return harness_view(seen)

    def _session(self, request: str, *steps: ModelResponse) -> Session:
        counter = itertools.count(1)
        harness = Harness(
            self.host, ScriptedModel(steps), store=self.store, new_id=lambda: str(next(counter))
        )
        return harness.session(self.agent, f"x04-{request}")

    async def make(self, move: Move) -> Seen:
        request, approval = move.request, move.approval
        result = self.paused.pop(request, None)
        if result is None:
            calling = ModelResponse(
                tool_calls=[ToolCall(call_id="c1", name=move.tool, arguments=move.arguments)]
            )
            result = await self._session(request, calling).run(f"Please call {move.tool}.")
        presented = False
        while result.status == "paused":
            (pending,) = result.interactions
            self._learn(request, pending)
            if approval is not None and not presented:
                decision = Approve(interaction_id=approval)
                presented = True
            elif approval is None and move.confirmed and pending.gate == "confirmation":
                decision = Approve(interaction_id=pending.interaction.id)
            else:
                self.paused[request] = result
                return seen_paused(pending.gate, pending.interaction.id)
            before = result
            result = await self._session(request).resume(decision)
            if result.status == "rejected":
                self.paused[request] = before
                return self._rejected(result, approval)
        (outcome,) = [r for r in result.results if r.call_id == "c1"]
        return seen_from_result(outcome)

    def _rejected(self, result: TurnResult, approval: str | None) -> Seen:
        # Step 7: approval A is presented for R7's call. The harness matches a decision to
        # the open interaction it names, and R7's is its own confirmation, so it refuses A
        # before the host is asked (nothing runs, no approval is made): the binding the
        # host's request_id_mismatch enforces, decided one layer earlier. Normalised as
        # the denied result the harness gives a model for that refusal.
        if (
            result.code == ResumeCodes.INVALID_INPUT
            and approval is not None
            and f"No open interaction {approval!r}" in (result.reason or "")
        ):
            return Seen(kind="denied")
        return Seen(kind=f"rejected {result.code}", reason=result.reason)

    def _learn(self, request: str, pending: PendingInteraction) -> None:
        self.ids[request] = derive_request_id(f"x04-{request}", pending.invocation_id)

    async def request_approval(self, request: str, tool: str, arguments: dict[str, Any]) -> Seen:
        asked = self.asked(request, tool, arguments)
        calling = ModelResponse(
            tool_calls=[ToolCall(call_id="c1", name="request_action_approval", arguments=asked)]
        )
        result = await self._session(request, calling).run("Ask for an approval first.")
        (outcome,) = [r for r in result.results if r.call_id == "c1"]
        return seen_from_result(outcome)


def seen_from_result(result: ToolResult) -> Seen:
    """A harness tool result, normalised (the charter code and reason are in ``details``)."""
    if result.kind == "completed":
        return Seen(kind="completed", output=result.output, replayed=result.replayed)
    if result.kind == "denied":
        return seen_from_model_text(result_text(result))
    details = result.details or {}
    reason = details.get("reason")
    return Seen(
        kind="failed",
        code=str(details.get("charterCode", result.code)),
        reason=reason if isinstance(reason, str) else None,
        replayed=result.replayed,
    )


# -- pydantic-ai ----------------------------------------------------------------------------

PYDANTIC_AI_SESSION = "x04-pydantic-ai"


class PydanticAiCaller(_ModelCaller):
    """``CharterToolset`` under a pydantic-ai ``Agent`` driven by its ``FunctionModel``.

    A request is a tool call id (``call-R1``) in one toolset session: its request id is
    derived from the two. Moves:

    - a call: a new run whose model makes the call with that tool call id (a retry reuses
      the id, as providers that number their calls do);
    - ``confirmed``: the app approves the deferred call (``DeferredToolResults``) and passes
      the approval request's metadata back; the toolset continues the host's pause in it
      with ``Host.resume``;
    - ``approval=A``: the app approves the deferred call passing back the metadata of the
      approval request that named A (for step 7: the one of R5's call, under R7's call);
    - the approver decides through ``host.approvals``.
    """

    name = "pydantic-ai"

    def __init__(self, host: Host, agent: Principal, approver: Principal) -> None:
        from charter.integrations.pydantic_ai import CharterToolset

        super().__init__(host, agent, approver)
        self.toolset = CharterToolset(host, agent, session_id=PYDANTIC_AI_SESSION)
        self.open: dict[str, tuple[Agent[None, str | DeferredToolRequests], Any]] = {}
        self.requests: dict[str, dict[str, Any]] = {}
        """The approval requests' metadata, by the approval id they name."""

    def _agent(
        self, tool: str, arguments: dict[str, Any], call_id: str
    ) -> Agent[None, str | DeferredToolRequests]:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse as PaiResponse
        from pydantic_ai.messages import TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel as PaiModel
        from pydantic_ai.tools import DeferredToolRequests

        def respond(messages: list[ModelMessage], info: AgentInfo) -> PaiResponse:
            if len(messages) == 1:
                # The model calls the tool by the name the toolset gave it (trips_cancel).
                called = model_name_for(tool)
                part = ToolCallPart(called, json.dumps(arguments), tool_call_id=call_id)
                return PaiResponse(parts=[part])
            return PaiResponse(parts=[TextPart("done")])

        return Agent(
            PaiModel(respond),
            toolsets=[self.toolset],
            output_type=[str, DeferredToolRequests],
        )

    async def make(self, move: Move) -> Seen:
        from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

        call_id = f"call-{move.request}"
        self.ids[move.request] = derive_request_id(PYDANTIC_AI_SESSION, call_id)
        opened = self.open.pop(move.request, None)
        if opened is None:
            agent = self._agent(move.tool, move.arguments, call_id)
            run = await agent.run(f"Please call {move.tool}.")
        else:
            agent, run = opened
        presented = False
        while isinstance(run.output, DeferredToolRequests):
            metadata = run.output.metadata[call_id]
            if metadata.get("approvalId"):
                self.requests.setdefault(metadata["approvalId"], metadata)
            if move.approval is not None and not presented:
                given = self.requests[move.approval]
                presented = True
            elif move.approval is None and move.confirmed and metadata["gate"] == "confirmation":
                given = metadata
            else:
                self.open[move.request] = (agent, run)
                return seen_paused(metadata["gate"], metadata.get("approvalId"))
            results = DeferredToolResults(approvals={call_id: True}, metadata={call_id: given})
            run = await agent.run(message_history=run.all_messages(), deferred_tool_results=results)
        return seen_from_pydantic_ai(run.new_messages(), call_id)

    async def request_approval(self, request: str, tool: str, arguments: dict[str, Any]) -> Seen:
        asked = self.asked(request, tool, arguments)
        call_id = f"call-{request}"
        run = await self._agent("request_action_approval", asked, call_id).run("Ask first.")
        return seen_from_pydantic_ai(run.new_messages(), call_id)


def seen_from_pydantic_ai(messages: list[ModelMessage], call_id: str) -> Seen:
    """What the model was given for ``call_id``: the tool's return, or a failure's text."""
    from pydantic_ai.messages import RetryPromptPart, ToolReturnPart

    given: Seen | None = None
    for message in messages:
        for part in message.parts:
            if getattr(part, "tool_call_id", None) != call_id:
                continue
            if isinstance(part, ToolReturnPart) and part.outcome == "success":
                given = Seen(kind="completed", output=part.content)
            elif isinstance(part, ToolReturnPart | RetryPromptPart):
                content = part.content
                given = seen_from_model_text(content if isinstance(content, str) else str(content))
    return given or Seen(kind="nothing returned")


# -- LangChain ------------------------------------------------------------------------------

LANGCHAIN_SESSION = "x04-langchain"


class LangChainCaller(_ModelCaller):
    """``charter_tools`` in a LangGraph agent (``create_agent``) on LangChain's fake model.

    A request is a tool call id (``call-R1``) in one ``charter_tools`` session: its request
    id is derived from the two. Each call is a graph run on a thread of its own. Moves:

    - a call: a new run whose model makes the call with that tool call id (a retry reuses
      the id); a pause is a graph ``interrupt``;
    - ``confirmed`` and ``approval``: the app resumes the thread with
      ``Command(resume=True)``; LangGraph re-runs the tool, which continues the host's
      pauses with ``Host.resume``;
    - step 7 cannot be made through LangChain: a caller sends only the person's answer,
      never an approval id, and the tool continues only the pause the host gives that very
      call. It is made at the host instead, as the agent, with the request id this bridge
      derives for R7's call and approval A; what a model would read of it is compared;
    - the approver decides through ``host.approvals``.
    """

    name = "langchain"

    def __init__(self, host: Host, agent: Principal, approver: Principal) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        from charter.integrations.langchain import charter_tools

        super().__init__(host, agent, approver)
        self.tools = charter_tools(host, agent, session_id=LANGCHAIN_SESSION)
        self.checkpointer = InMemorySaver()
        self.threads = itertools.count(1)
        self.open: dict[str, tuple[Any, dict[str, Any], dict[str, Any]]] = {}
        self.owners: dict[str, str] = {}
        """The request each approval id was asked for."""

    def _graph(self, tool: str, arguments: dict[str, Any], call_id: str) -> Any:
        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage

        called = model_name_for(tool)  # the name the model was given (trips_cancel)
        first = AIMessage(
            content="", tool_calls=[{"name": called, "args": arguments, "id": call_id}]
        )
        replies: Iterator[AIMessage] = itertools.chain([first], itertools.repeat(AIMessage("done")))
        return create_agent(
            fake_tool_model()(messages=replies), tools=self.tools, checkpointer=self.checkpointer
        )

    async def _start(
        self, request: str, tool: str, arguments: dict[str, Any], call_id: str
    ) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        graph = self._graph(tool, arguments, call_id)
        config = {"configurable": {"thread_id": f"{request}-{next(self.threads)}"}}
        state = await graph.ainvoke(
            {"messages": [{"role": "user", "content": f"Please call {tool}."}]}, config
        )
        return graph, config, state

    async def make(self, move: Move) -> Seen:
        from langgraph.types import Command

        request, approval = move.request, move.approval
        call_id = f"call-{request}"
        self.ids[request] = derive_request_id(LANGCHAIN_SESSION, call_id)
        opened = self.open.pop(request, None)
        if opened is None:
            opened = await self._start(request, move.tool, move.arguments, call_id)
        graph, config, state = opened
        presented = False
        while state.get("__interrupt__"):
            (interrupt,) = state["__interrupt__"]
            payload: dict[str, Any] = interrupt.value
            if payload.get("approvalId"):
                self.owners.setdefault(payload["approvalId"], request)
            if approval is not None and not presented:
                if self.owners.get(approval) != request:
                    self.open[request] = (graph, config, state)
                    return await self._at_host(request, move.tool, move.arguments, approval)
                presented = True
            elif not (approval is None and move.confirmed and payload["gate"] == "confirmation"):
                self.open[request] = (graph, config, state)
                return seen_paused(payload["gate"], payload.get("approvalId"))
            state = await graph.ainvoke(Command(resume=True), config)
        return seen_from_langchain(state, call_id)

    async def _at_host(
        self, request: str, tool: str, arguments: dict[str, Any], approval: str
    ) -> Seen:
        # See the class docstring: no LangChain caller can send an approval id.
        sent = {**arguments, **charter_controls(self.ids[request], True, approval)}
        return seen_from_outcome(await self.host.invoke(tool, sent, self.agent))

    async def request_approval(self, request: str, tool: str, arguments: dict[str, Any]) -> Seen:
        asked = self.asked(request, tool, arguments)
        call_id = f"call-{request}"
        _, _, state = await self._start(request, "request_action_approval", asked, call_id)
        return seen_from_langchain(state, call_id)


def seen_from_langchain(state: dict[str, Any], call_id: str) -> Seen:
    """The tool message the graph got for ``call_id``, normalised."""
    from langchain_core.messages import ToolMessage

    messages = [
        m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    ]
    if not messages:
        return Seen(kind="nothing returned")
    message = messages[-1]
    if message.status == "success":
        return Seen(kind="completed", output=json.loads(str(message.content)))
    return seen_from_model_text(str(message.content))


# -- opening a caller -----------------------------------------------------------------------


@asynccontextmanager
async def open_caller(transport: str, site: ProtocolSite) -> AsyncIterator[ProtocolCaller]:
    """The caller for ``transport`` on ``site``, open until the block ends."""
    async with AsyncExitStack() as stack:
        if transport == "rest":
            http = HttpCaller(site.site)
            stack.push_async_callback(http.aclose)
            yield RestCaller(http)
        elif transport == "mcp-http":
            yield McpProtocolCaller(await stack.enter_async_context(mcp_http_caller(site.site)))
        elif transport == "mcp-stdio":
            stdio = mcp_stdio_caller(site.db_url, site.keys, site.keys_file)
            yield McpProtocolCaller(await stack.enter_async_context(stdio))
        elif transport == "cli":
            yield CliCaller(site.site.url, site.keys)
        else:
            # The host the in-process caller, the harness and the bridges share: the
            # travel host on the same database, in this event loop.
            store = await stack.enter_async_context(SqlStore(site.db_url))
            host = await build_host(store)
            stack.callback(host.registry.close)
            agent = await _principal(host, site.keys[AGENT])
            approver = await _principal(host, site.keys[APPROVER])
            callers: dict[str, Callable[[Host, Principal, Principal], ProtocolCaller]] = {
                "in-process": InProcessCaller,
                "harness": HarnessCaller,
                "pydantic-ai": PydanticAiCaller,
                "langchain": LangChainCaller,
            }
            yield callers[transport](host, agent, approver)


async def _principal(host: Host, key: str) -> Principal:
    principal = await host.authenticate(Credentials(bearer=key))
    assert principal is not None
    return principal
