"""Action policies, reserved invocation controls, targets and command fingerprints."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from ._canonical import sha256_fingerprint
from .auth import IDENTITY_PATTERN, holds_control_character, js_trim
from .errors import ErrorCode, ToolError
from .risk import DeploymentRisk, RiskPolicy, RiskTier

if TYPE_CHECKING:
    from pydantic import JsonValue

__all__ = (
    "CONTROL_FIELD",
    "CONTROL_SCHEMAS",
    "ActionPolicy",
    "CommandClaim",
    "ControlSpec",
    "CreatedTarget",
    "HandlerActionPolicy",
    "InvocationControls",
    "TargetResolution",
    "command_fingerprint",
    "controls_schema",
    "default_action_policy",
)

CONTROL_FIELD = "_charter"
"""The reserved argument that carries invocation controls; domain schemas may not use it."""

TargetResolution = Literal["package-resolver", "command-target-field", "tenant-collection"]
"""How the host finds the target of a ledgered generic action, in order of precedence."""

ControlName = Literal["requestId", "confirmed", "approvalId", "reasonCode"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CreatedTarget:
    """Identity of a command that creates its target (the handler generates the id)."""

    command_target_type: str
    """The type of the command itself (e.g. ``trip-create-command``)."""
    result_reference_type: str
    """The type of the reference the handler records (e.g. ``trip``); no ``:`` allowed."""
    durability: Literal["handler-command-claim-v1"] = "handler-command-claim-v1"


@dataclass(frozen=True, kw_only=True, slots=True)
class ActionPolicy:
    """How the host gates a tool's action: ledger, confirmation, approval, target."""

    kind: Literal["execute", "read", "sensitive-read"] = "execute"
    target_type: str
    """What the action acts on (``trip``, ``booking``)."""
    command_target_field: str | None = None
    """Input field holding the target id (trimmed)."""
    target_lifecycle: Literal["existing", "created"] = "existing"
    created_target: CreatedTarget | None = None
    ledger: Literal["required", "optional", "never"] = "required"
    """``required``: every call is ledgered (a requestId is required); ``optional``: a call
    that sends a requestId is ledgered (replay, conflict, in progress), one without runs
    directly; ``never``: the action is idempotent on its own key (deciding an approval),
    so a requestId only correlates."""
    approval: Literal["never", "conditional", "required"] = "never"
    confirmation: Literal["never", "required"] = "never"
    """Whether the caller must send ``confirmed: true`` (also implied by approval)."""
    allowed_actor_types: tuple[str, ...] = ()
    """Actor types that may run the action; empty means any."""
    risk: DeploymentRisk | None = None
    """The evaluated risk; defaults to the tool's deployment risk."""


def default_action_policy(tier: RiskTier, target_type: str) -> ActionPolicy | None:
    """Return the secure-by-default policy for a tool that declares none."""
    if tier is RiskTier.READ:
        return None
    if tier is RiskTier.WRITE:
        return ActionPolicy(target_type=target_type)
    if tier is RiskTier.SENSITIVE:
        return ActionPolicy(target_type=target_type, confirmation="required")
    return ActionPolicy(target_type=target_type, confirmation="required", approval="required")


@dataclass(frozen=True, kw_only=True, slots=True)
class ControlSpec:
    """The reserved controls a tool requires and accepts."""

    required: tuple[ControlName, ...] = ()
    optional: tuple[ControlName, ...] = ()

    @property
    def accepted(self) -> frozenset[str]:
        """Every control name the tool accepts."""
        return frozenset(self.required) | frozenset(self.optional)

    @classmethod
    def for_policy(cls, policy: ActionPolicy | None, risk: RiskPolicy) -> ControlSpec:
        """Derive the controls from a policy and a risk policy."""
        confirm = risk.confirmation_required or (
            policy is not None and (policy.confirmation == "required" or policy.approval != "never")
        )
        required: list[ControlName] = []
        optional: list[ControlName] = []
        needs_request_id = policy is not None and (
            (policy.ledger == "required" and policy.kind == "execute") or policy.approval != "never"
        )
        # Every tool accepts a requestId (for correlation); ledgered executes and
        # approval-gated tools require one, since it keys the ledger and the approval.
        (required if needs_request_id else optional).append("requestId")
        if confirm:
            required.append("confirmed")
        elif policy is not None and policy.kind == "execute":
            optional.append("confirmed")
        if policy is not None and policy.approval != "never":
            optional.append("approvalId")
        optional.append("reasonCode")
        return cls(required=tuple(required), optional=tuple(optional))


_ID_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "pattern": IDENTITY_PATTERN,
}

CONTROL_SCHEMAS: Mapping[str, dict[str, Any]] = {
    "requestId": {
        "type": "string",
        "format": "uuid",
        "description": "A UUID you generate once per action and reuse when you retry the same "
        "action; repeating it returns the stored result instead of acting twice.",
    },
    "confirmed": {
        # Any JSON value is accepted; only the boolean true confirms (InvocationControls).
        "description": "true once the user confirmed this exact action; any other value "
        "leaves the call unconfirmed.",
        "examples": [True],
    },
    "approvalId": {**_ID_SCHEMA, "description": "The approval an approver granted for this call."},
    "reasonCode": {**_ID_SCHEMA, "description": "Why the action is taken; recorded with it."},
    "onBehalfOf": {**_ID_SCHEMA, "description": "The tenant to act for (admin scope only)."},
}
"""The JSON Schema of each reserved control, as ``InvocationControls`` parses it."""


def controls_schema(
    spec: ControlSpec,
    *,
    delegable: bool,
    nullable: bool = False,
    require: bool = True,
    note: str = "",
) -> dict[str, Any] | None:
    """The JSON Schema of a tool's ``_charter`` object (None when it accepts no controls).

    Args:
        spec: the tool's controls.
        delegable: whether the tool also accepts ``onBehalfOf``.
        nullable: let each control be ``null`` ("not given", as the host reads it).
        require: list the required controls as required (transports that also take
            them from headers say False).
        note: a sentence appended to the description.
    """
    names: list[str] = [*spec.required, *(n for n in spec.optional if n not in spec.required)]
    if delegable:
        names.append("onBehalfOf")
    if not names:
        return None
    properties = {
        name: _nullable(CONTROL_SCHEMAS[name]) if nullable else dict(CONTROL_SCHEMAS[name])
        for name in names
    }
    needs = f"This tool requires {', '.join(spec.required)}." if spec.required else ""
    schema: dict[str, Any] = {
        "type": "object",
        "description": " ".join(
            part
            for part in (
                "charter invocation controls (never part of the tool's input).",
                needs,
                note,
            )
            if part
        ),
        "properties": properties,
        "additionalProperties": False,
    }
    if require and spec.required:
        schema["required"] = list(spec.required)
    return schema


def _nullable(schema: Mapping[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    return {**schema, "type": [kind, "null"]} if isinstance(kind, str) else dict(schema)


def _printable_id(value: str) -> str:
    """``value`` if it holds no character an identity may not (``holds_control_character``)."""
    # A bidi override or a zero-width character makes a reason code read otherwise than it
    # is ("\u202edevorppa-erp OFC" shows as "CFO pre-approved") to the person deciding.
    if holds_control_character(value):
        raise ValueError(
            "must not hold control or format characters (line breaks, bidi overrides, "
            "zero-width characters)"
        )
    return value


# Trimmed like every other id charter compares (JavaScript's whitespace set, js_trim), so
# a tenant named in onBehalfOf and one named in a tenant field resolve alike; and printable
# as every identity is, since a person reads them.
_TrimmedId = Annotated[
    str,
    AfterValidator(js_trim),
    StringConstraints(min_length=1, max_length=200),
    AfterValidator(_printable_id),
]


class InvocationControls(BaseModel):
    """The reserved ``_charter`` controls of one call, parsed strictly.

    Unknown keys are rejected. ``confirmed`` counts only as the boolean ``true``:
    ``"true"``, ``1`` or ``"yes"`` leave the call unconfirmed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    request_id: UUID | None = Field(default=None, alias="requestId", strict=False)
    confirmed: object = None
    approval_id: _TrimmedId | None = Field(default=None, alias="approvalId")
    reason_code: _TrimmedId | None = Field(default=None, alias="reasonCode")
    on_behalf_of: _TrimmedId | None = Field(default=None, alias="onBehalfOf")
    """The tenant a delegable tool should act for (admin scope only)."""

    @property
    def is_confirmed(self) -> bool:
        """True only when ``confirmed`` is the boolean ``true``."""
        return self.confirmed is True

    @property
    def request_key(self) -> str | None:
        """The request id in canonical (lower-case) form."""
        return str(self.request_id) if self.request_id is not None else None

    def given(self) -> frozenset[str]:
        """The control names the caller actually sent."""
        return frozenset(
            self.model_dump(by_alias=True, exclude_unset=True, exclude_none=True).keys()
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandClaim:
    """A created-target command's claim, taken by the handler before it mutates anything."""

    prior: str | None
    """The stored result reference on an exact replay; None on a first execution."""
    record: Callable[[str], Awaitable[None]]
    """Record the typed result reference (``"trip:trp_123"``) in the same transaction."""


ClaimFactory = Callable[[], Awaitable[CommandClaim]]


@dataclass(frozen=True, kw_only=True, slots=True, weakref_slot=True, eq=False)
class HandlerActionPolicy:
    """A request-scoped admission minted by the host for a handler-enforced tool.

    Only a registry can mint one; a copy or a value built by a caller is refused.
    """

    capability_id: str
    capability_version: str
    canonical_name: str
    action_policy: ActionPolicy
    controls: InvocationControls
    claim_factory: ClaimFactory | None = None

    async def claim(self) -> CommandClaim:
        """Claim the command before mutating; see ``CommandClaim``."""
        if self.claim_factory is None:
            raise ToolError(
                ErrorCode.ACTION_POLICY_REQUIRED,
                f"Tool {self.canonical_name!r} needs a durable store to claim its command.",
                meta={"reason": "claim_unavailable"},
            )
        return await self.claim_factory()


def command_fingerprint(
    *,
    capability_id: str,
    capability_version: str,
    tenant_id: str,
    target: str | None,
    arguments: JsonValue,
) -> str:
    """Fingerprint a command: SHA-256 over RFC 8785 canonical JSON, controls excluded."""
    return sha256_fingerprint(
        {
            "capabilityId": capability_id,
            "capabilityVersion": capability_version,
            "tenantId": tenant_id,
            "target": target,
            "input": arguments,
        }
    )
