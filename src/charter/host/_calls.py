"""What a transport hands the host about a call, and what the host hands back."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from hashlib import sha1

from pydantic import BaseModel

from .._frozen import set_fields
from .._wording import canonical_uuid
from ..auth import Principal
from ..context import CancelSignal, LogSink, ProgressSink, ResumeInfo, Sampler, ToolContext
from ..ledger import LedgerKey
from ..manifest import RegisteredTool
from ..outcome import Failed, ToolOutcome
from ..policy import InvocationControls
from ..registry import PreparedAction
from ._trace import Trace

__all__ = (
    "NO_CALL_OPTIONS",
    "CallOptions",
    "ContextFactory",
    "PreparedCall",
    "Settlement",
    "canonical_request_id",
    "derive_request_id",
)

ContextFactory = Callable[
    [Principal | None, RegisteredTool, InvocationControls], ToolContext | Awaitable[ToolContext]
]
"""Builds the domain context for a call. Usage ``ContextFactory`` (sync or async)."""


@dataclass(frozen=True, kw_only=True, init=False)
class CallOptions:
    """Transport facts about one call: its ids, signals and where progress goes."""

    # Transports build one per call: its __init__ sets every field in one call
    # (charter._frozen; tests/test_frozen.py keeps its parameters the fields).
    cancel: CancelSignal | None = None
    progress_sink: ProgressSink | None = None
    log_sink: LogSink | None = None
    sampler: Sampler | None = None
    """Asks the caller's model for a completion (MCP sampling), when the transport can."""
    audience: str | None = None
    """The audience the call is made for; defaults to the principal's actor type."""
    session_id: str | None = None
    turn_id: str | None = None
    step_id: str | None = None
    call_id: str | None = None
    invocation_id: str | None = None
    resume: ResumeInfo | None = None
    state: object = None
    model_name: str | None = None
    """The name a model called the tool by (``charter.harness.names``); audited with the call."""

    def __init__(
        self,
        *,
        cancel: CancelSignal | None = None,
        progress_sink: ProgressSink | None = None,
        log_sink: LogSink | None = None,
        sampler: Sampler | None = None,
        audience: str | None = None,
        session_id: str | None = None,
        turn_id: str | None = None,
        step_id: str | None = None,
        call_id: str | None = None,
        invocation_id: str | None = None,
        resume: ResumeInfo | None = None,
        state: object = None,
        model_name: str | None = None,
    ) -> None:
        """Set every field (the keyword arguments are the fields, as a dataclass's are)."""
        set_fields(
            self,
            {
                "cancel": cancel,
                "progress_sink": progress_sink,
                "log_sink": log_sink,
                "sampler": sampler,
                "audience": audience,
                "session_id": session_id,
                "turn_id": turn_id,
                "step_id": step_id,
                "call_id": call_id,
                "invocation_id": invocation_id,
                "resume": resume,
                "state": state,
                "model_name": model_name,
            },
        )


@dataclass(eq=False, kw_only=True, slots=True, weakref_slot=True)
class PreparedCall:
    """A call that passed every check before its handler; ``Host.execute`` runs it once.

    Only the host that prepared it can execute it (identity, not structure, decides), and
    only once.
    """

    action: PreparedAction
    """The validated input and resolved target."""
    context: ToolContext
    """The handler's context, built for this call."""
    principal: Principal | None
    controls: InvocationControls
    fingerprint: str | None
    """The command fingerprint (tools with an action policy)."""
    ledger_key: LedgerKey | None
    """The ledger row the call will claim, or None when it runs unledgered."""
    trace: Trace = field(repr=False)

    @property
    def tool(self) -> RegisteredTool:
        """The tool the call runs."""
        return self.action.tool

    @property
    def name(self) -> str:
        """The tool's canonical name."""
        return self.action.tool.name

    @property
    def input(self) -> BaseModel:
        """The validated input model."""
        return self.action.input

    @property
    def target(self) -> str | None:
        """The resolved action target, when the policy has one."""
        return self.action.target

    @property
    def request_id(self) -> str | None:
        """The request id in canonical form, if the call has one."""
        return self.controls.request_key


@dataclass(frozen=True, kw_only=True, slots=True)
class Settlement:
    """What ``Host.settle`` did: whether it stored the outcome and, if not, why."""

    settled: bool
    stored: ToolOutcome | None = None
    """The outcome as stored (a completed output in its validated, serialised form)."""
    refused: Failed | None = None
    """Why nothing was stored (unknown call, already settled, output that breaks the schema)."""

    def __bool__(self) -> bool:
        return self.settled


NO_CALL_OPTIONS = CallOptions()
"""The transport facts of a call that gave none (frozen, so one instance serves all)."""

_REQUEST_NAMESPACE = uuid.UUID("6b0d4a52-8f55-4f0a-9a63-3c2f3f0c1a77")
"""The namespace of derived request ids (the harness's since its first release)."""
_NAMESPACE_BYTES = _REQUEST_NAMESPACE.bytes


def derive_request_id(scope: str, call_id: str) -> str:
    """The request id of a call whose caller sends none: a UUID from two stable ids.

    For callers that make a call on someone's behalf and can name it stably across
    retries, pauses and restarts (the harness: session and invocation ids; the bridges:
    their session and the model's tool call id). The same two ids always give the same
    request id, so a re-run reaches the same ledger row and replays.
    """
    # uuid.uuid5 by hand (RFC 9562 §5.5): the same string, without building a UUID object
    # on every model tool call (3x faster; a test pins the equality).
    digest = bytearray(sha1(_NAMESPACE_BYTES + f"{scope}\x1f{call_id}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC variant
    hex_ = digest.hex()
    return f"{hex_[:8]}-{hex_[8:12]}-{hex_[12:16]}-{hex_[16:20]}-{hex_[20:]}"


def canonical_request_id(value: object) -> str | None:
    """A request id as a canonical lower-case UUID, or None when it is not a UUID."""
    return canonical_uuid(value)
