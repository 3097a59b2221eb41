"""Tools that let approvers (and agents acting for them) work approvals through any transport."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ._wording import canonical_uuid
from .auth import Principal
from .context import ToolContext
from .errors import ErrorCode, ToolError
from .host import Host
from .ledger import ApprovalRecord
from .outcome import Completed, Denied, Failed
from .policy import ActionPolicy
from .risk import RiskPolicy
from .tool import Tool, define_tool

__all__ = (
    "APPROVER_SCOPE",
    "ApprovalDecisionInput",
    "ApprovalList",
    "ApprovalListInput",
    "ApprovalRequestInput",
    "ApprovalView",
    "approval_tools",
)

APPROVER_SCOPE = "charter:approve"


class ApprovalDecisionInput(BaseModel):
    """Which approval to decide, and why."""

    model_config = ConfigDict(extra="forbid")

    approval_id: str = Field(min_length=1, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)


class ApprovalView(BaseModel):
    """An approval as an approver or requester sees it."""

    approval_id: str
    status: Literal["pending", "approved", "denied", "consumed"]
    tool: str
    target: str | None
    arguments: dict[str, Any]
    requester: str
    """The requester's subject."""
    requester_tenant: str | None = None
    """The requester's home tenant (differs from yours for another tenant's admin)."""
    risk: str
    expires_at: datetime
    decided_by: str | None = None
    """Who made the latest decision (``tenant/subject``)."""
    reason: str | None = None
    history: list[dict[str, Any]] = Field(default_factory=list)
    """Every decision, oldest first."""


def _a_uuid(value: str) -> str:
    """``value`` unchanged when it is a UUID (the request id of the call to approve)."""
    if canonical_uuid(value) is None:
        raise ValueError("must be a UUID you generate once for the action")
    return value


class ApprovalRequestInput(BaseModel):
    """The call to ask approval for: the tool, its exact arguments and your request id."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, max_length=128)
    arguments: dict[str, Any]
    request_id: Annotated[str, AfterValidator(_a_uuid)] = Field(
        min_length=1, max_length=64, json_schema_extra={"format": "uuid"}
    )
    """A UUID, as every request id: the schema says so, and validation refuses anything else."""


class ApprovalListInput(BaseModel):
    """Which approvals to list."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["pending", "approved", "denied", "consumed"] | None = "pending"


class ApprovalList(BaseModel):
    """Approvals in the caller's tenant."""

    approvals: list[ApprovalView]


_DECISION_RISK = RiskPolicy(
    destructive=False, reversible=False, dry_run_supported=False, side_effects=("data-write",)
)
# A decision authorises another call, so the person must confirm it: a model acting for an
# approver (the harness, an MCP client) pauses for them instead of deciding by itself.
_DECISION_POLICY = ActionPolicy(
    kind="execute",
    target_type="approval",
    command_target_field="approval_id",
    ledger="never",
    confirmation="required",
)


def approval_tools(
    host: Host, *, approver_scope: str = APPROVER_SCOPE
) -> list[Tool[Any, Any, Any]]:
    """Build the approval tools over ``host.approvals``; register them to expose them.

    The tools are ``request_action_approval``, ``approve_action_approval``,
    ``deny_action_approval`` and ``list_action_approvals``.
    """

    async def approve(args: ApprovalDecisionInput, ctx: ToolContext) -> ApprovalView:
        return _view(await host.approvals.grant(args.approval_id, _principal(ctx), args.reason))

    async def deny(args: ApprovalDecisionInput, ctx: ToolContext) -> ApprovalView:
        return _view(await host.approvals.deny(args.approval_id, _principal(ctx), args.reason))

    async def listing(args: ApprovalListInput, ctx: ToolContext) -> ApprovalList:
        records = await host.approvals.list(_principal(ctx), args.status)
        return ApprovalList(approvals=[_view(r) for r in records])

    async def request(args: ApprovalRequestInput, ctx: ToolContext) -> ApprovalView:
        # ``prepare`` only: asking can never run the tool, whatever its policy.
        asked = await host.request_approval(
            args.tool, args.arguments, _principal(ctx), request_id=args.request_id
        )
        if isinstance(asked, ApprovalRecord):
            return _view(asked)
        if isinstance(asked, Failed):
            raise ToolError(asked.code, asked.message, meta=asked.meta)
        if isinstance(asked, Denied):
            raise ToolError(
                ErrorCode.AUTHORIZATION_DENIED,
                asked.reason,
                meta={"reason": asked.cause or "denied", "approvalId": asked.approval_id},
            )
        if isinstance(asked, Completed):
            raise ToolError(
                ErrorCode.INVALID_INPUT,
                f"Request {args.request_id} already ran; its result is stored. Nothing to approve.",
                meta={"reason": "already_executed"},
            )
        raise ToolError(
            ErrorCode.INVALID_INPUT,
            f"Tool {args.tool!r} does not need an approval for this call.",
            meta={"reason": "approval_not_required"},
        )

    common: dict[str, Any] = {"tier": "write", "risk_policy": _DECISION_RISK, "owner": "charter"}

    def decision(
        name: str,
        description: str,
        handler: Callable[[ApprovalDecisionInput, ToolContext], Awaitable[ApprovalView]],
    ) -> Tool[ApprovalDecisionInput, ApprovalView, ToolContext]:
        """A tool that decides an approval: approvers only, bound to the approval's id."""
        return define_tool(
            name=name,
            description=description,
            input_schema=ApprovalDecisionInput,
            output_schema=ApprovalView,
            handler=handler,
            required_scopes=(approver_scope,),
            action_policy=_DECISION_POLICY,
            **common,
        )

    return [
        define_tool(
            name="request_action_approval",
            description="Ask for a person's approval of one exact call (tool, arguments, "
            "requestId) before making it; returns the approvalId to pass later.",
            input_schema=ApprovalRequestInput,
            output_schema=ApprovalView,
            handler=request,
            action_policy=ActionPolicy(
                kind="execute", target_type="approval-request", ledger="never"
            ),
            **common,
        ),
        decision(
            "approve_action_approval",
            "Grant a pending approval (approvers only; not your own request).",
            approve,
        ),
        decision(
            "deny_action_approval",
            "Deny a pending approval, or revoke a granted one not yet used.",
            deny,
        ),
        define_tool(
            name="list_action_approvals",
            description="List approvals in your tenant (approvers see all, others their own).",
            input_schema=ApprovalListInput,
            output_schema=ApprovalList,
            handler=listing,
            tier="read",
            owner="charter",
        ),
    ]


def _principal(ctx: ToolContext) -> Principal:
    if ctx.principal is None:
        raise ToolError(ErrorCode.UNAUTHENTICATED, "Approvals need an authenticated caller.")
    return ctx.principal


def _view(record: ApprovalRecord | Failed) -> ApprovalView:
    if isinstance(record, Failed):
        raise ToolError(record.code, record.message, meta=record.meta)
    return ApprovalView(
        approval_id=record.id,
        status=record.status,
        tool=record.tool,
        target=record.target,
        arguments=record.arguments,
        requester=record.requester_subject,
        requester_tenant=record.requester_tenant,
        risk=record.risk,
        expires_at=record.expires_at,
        decided_by=record.decided_by,
        reason=record.decision_reason,
        history=[d.model_dump(mode="json") for d in record.history],
    )
