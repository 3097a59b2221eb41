"""The JSON bodies the HTTP transport sends and reads (camelCase on the wire)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from charter.audit import AuditEvent
from charter.effects import EffectRecord
from charter.ledger import (
    ActionStatus,
    ApprovalDecision,
    ApprovalRecord,
    ListedStatus,
)
from charter.outcome import Interaction

from ._wire import WireModel

__all__ = (
    "AcceptedBody",
    "ActionStatusBody",
    "ApprovalBody",
    "ApprovalListBody",
    "AuditBody",
    "AuditEventBody",
    "BudgetBody",
    "BudgetsBody",
    "CallResultBody",
    "DecisionBody",
    "HealthBody",
    "ProblemBody",
    "ReadyBody",
    "ToolListBody",
    "UpstreamBody",
    "UpstreamsBody",
    "WhoamiBody",
)


class ProblemBody(BaseModel):
    """An RFC 9457 problem; the extension members use the outcome's own field names."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str
    """``urn:charter:error:<CODE>`` for charter's codes, ``about:blank`` otherwise."""
    title: str
    status: int
    detail: str
    code: str | None = None
    """The ``ErrorCode``; absent for plain HTTP problems (an unknown route, a bad method)."""
    reason: str | None = None
    """The finer cause (``meta.reason``), e.g. ``insufficient_scope`` or ``invalid_json``."""
    next_steps: list[str] = Field(default_factory=list)
    """What a caller, or a model, can do about it."""
    retryable: bool = False
    """Whether the same request may succeed unchanged later."""
    meta: dict[str, JsonValue] | None = None
    """Structured details: validation issues, missing scopes, suggestions; never on a 500."""
    error_id: str | None = None
    """The id to report for a server error; the only detail a 500 carries."""
    replayed: bool | None = None
    """True when this is the stored outcome of an earlier identical request."""


class CallResultBody(WireModel):
    """A completed call: the tool's validated output."""

    output: JsonValue
    replayed: bool


class AcceptedBody(WireModel):
    """A call that is paused for a person (``interaction-required``) or continues elsewhere."""

    kind: Literal["interaction-required", "deferred"]
    interaction: Interaction | None = None
    gate: Literal["confirmation", "approval", "handler"] | None = None
    """What paused the call: the confirmation gate, the approval gate or the tool itself."""
    approval_id: str | None = None
    """The approval an approver must grant, for approval interactions."""
    approval_status: Literal["pending", "approved", "denied", "consumed"] | None = None
    expires_at: datetime | None = None
    """When the approval expires unless it is decided and used by then."""
    request_id: str | None = None
    """The request id to retry with and to look up under ``/v1/actions/{requestId}``."""
    retry_with: dict[str, JsonValue] | None = None
    """The ``_charter`` controls to send (or their headers) when retrying to continue."""
    next_steps: list[str] = Field(default_factory=list)
    token: JsonValue = None


class ToolListBody(WireModel):
    """The manifest entries the caller may call."""

    contract_version: str
    tools: list[dict[str, Any]]


class ApprovalDecisionBody(WireModel, ApprovalDecision):
    """One decision in an approval's history."""

    # ``ApprovalDecision``'s fields, camelCase on the wire (the docstring above is the
    # OpenAPI description).


class ApprovalBody(WireModel):
    """One approval, as an approver (or its requester) sees it."""

    id: str
    tenant_id: str
    requester_id: str
    """The requester's principal key, ``<home tenant>/<subject>``."""
    requester_tenant: str | None = None
    """The requester's home tenant (another tenant's admin, for a delegated call)."""
    requester_subject: str
    request_id: str
    tool: str
    description: str | None = None
    """What the tool does, from its declaration (absent if it is no longer registered)."""
    tier: str | None = None
    capability_id: str
    capability_version: str
    target: str | None
    arguments: dict[str, Any]
    """The exact, validated arguments the approval is bound to."""
    risk: str
    reason_code: str | None = None
    status: ListedStatus
    """Where it stands now: ``expired`` once pending or granted past ``expiresAt`` (it can
    no longer be decided or used)."""
    created_at: datetime
    expires_at: datetime
    decided_by: str | None = None
    decided_at: datetime | None = None
    decision_reason: str | None = None
    consumed_by: str | None = None
    history: list[ApprovalDecisionBody] = Field(default_factory=list)
    """Every decision, oldest first (a revocation keeps who granted)."""

    @classmethod
    def from_record(
        cls,
        record: ApprovalRecord,
        *,
        description: str | None,
        tier: str | None,
        now: datetime,
    ) -> ApprovalBody:
        """Render a stored approval as it stands at ``now``; the fingerprint stays here."""
        data = record.model_dump(exclude={"fingerprint", "status"})
        return cls(
            **data,
            status=record.status_at(now),
            requester_tenant=record.requester_tenant,
            requester_subject=record.requester_subject,
            description=description,
            tier=tier,
        )


class ApprovalListBody(WireModel):
    """Approvals in the caller's tenant, newest first."""

    approvals: list[ApprovalBody]
    next: str | None = None
    """The ``before`` cursor of the next page (older approvals); None on the last page."""


class DecisionBody(WireModel):
    """The optional body of ``:grant`` and ``:deny``."""

    reason: str | None = Field(default=None, max_length=2000)


class ActionStatusBody(WireModel, ActionStatus):
    """Where a request stands."""

    # ``ActionStatus``'s fields, camelCase on the wire (the docstring above is the OpenAPI
    # description).

    @classmethod
    def from_status(cls, status: ActionStatus) -> ActionStatusBody:
        """Render the host's ``ActionStatus``."""
        return cls(**status.model_dump())


class AuditEventBody(WireModel, AuditEvent):
    """One audit event."""

    # ``AuditEvent``'s fields, camelCase on the wire (the docstring above is the OpenAPI
    # description). These four are required in the body's schema: the event defaults
    # them when it is built, but every stored event has them.
    delegated: bool
    admin_used: bool
    replayed: bool
    duration_ms: float

    @classmethod
    def from_event(cls, event: AuditEvent) -> AuditEventBody:
        """Render a stored audit event."""
        return cls(**event.model_dump())


class AuditBody(WireModel):
    """Recent audit events of one tenant, newest first."""

    tenant: str
    events: list[AuditEventBody]


class BudgetBody(WireModel):
    """One rate limit or quota being spent: whose, how much, until when."""

    tool: str
    """The tool it is declared on, or ``*`` for a host-wide limit."""
    limit: str
    holder: str
    """A principal's key (``tenant/subject``) or ``tenant:<id>``."""
    used: int
    capacity: int
    full_in: float
    """Seconds until the budget is full again."""


class BudgetsBody(WireModel):
    """The budgets being spent by calls for one tenant (full ones are not listed)."""

    tenant: str
    budgets: list[BudgetBody]


class EffectBody(WireModel):
    """One effect in the outbox and where its delivery stands (docs/effects.md)."""

    key: str
    """The idempotency key handed to the effect's function."""
    name: str
    tenant_id: str
    status: Literal["pending", "delivered", "dead", "discarded"]
    attempts: int
    max_attempts: int
    request_id: str | None = None
    """The call that staged it (None when host code enqueued it)."""
    tool: str | None = None
    seq: int
    payload: JsonValue
    next_attempt_at: datetime
    last_error: str | None = None
    created_at: datetime
    delivered_at: datetime | None = None

    @classmethod
    def from_record(cls, record: EffectRecord) -> EffectBody:
        """The wire form of an outbox record (the lease is internal)."""
        return cls.model_validate(record, from_attributes=True)


class EffectsBody(WireModel):
    """The effects of one tenant the caller may see, newest first."""

    tenant: str
    effects: list[EffectBody]


class WhoamiBody(WireModel):
    """The authenticated caller, for consoles and scripts."""

    subject: str
    tenant_id: str
    kind: str
    actor: str
    display_name: str | None = None
    scopes: list[str]
    approver: bool
    """Whether the caller may decide approvals (a hint for UIs; the host decides)."""
    admin: bool = False
    """Whether the caller holds the admin scope (with ``kind`` person, it may retry and
    discard effects)."""


class HealthBody(WireModel):
    """Liveness or readiness."""

    status: Literal["ok"]


class UpstreamBody(WireModel):
    """One upstream MCP server the gateway governs (``charter.gateway.UpstreamHealth``)."""

    name: str
    namespace: str
    transport: Literal["stdio", "http"]
    state: Literal["connecting", "connected", "down", "closed"]
    since: datetime
    tools: int
    calls: int
    reconnects: int
    last_error: str | None = None


class UpstreamsBody(WireModel):
    """Every upstream MCP server the gateway governs (none without one)."""

    upstreams: list[UpstreamBody]


class ReadyBody(WireModel):
    """Readiness: the store answers and, with a gateway, every upstream is connected."""

    status: Literal["ok"]
    upstreams: list[UpstreamBody] | None = None
    """Each upstream MCP server, when the server runs a gateway."""
