"""The created-target claim a handler-enforced tool takes in its call's transaction."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from ..errors import ErrorCode, ToolError
from ..policy import CommandClaim
from .protocols import LedgerTransaction
from .records import ClaimRecord, LedgerEntry

__all__ = ("claim_factory",)


def claim_factory(
    tx: LedgerTransaction, entry: LedgerEntry, clock: Callable[[], datetime]
) -> Callable[[], Awaitable[CommandClaim]]:
    taken: list[CommandClaim] = []

    async def claim() -> CommandClaim:
        if taken:
            return taken[0]
        existing = await tx.get_claim(entry.tenant_id, entry.principal_id, entry.request_id)
        if existing is not None:
            if existing.fingerprint != entry.fingerprint:
                raise ToolError(
                    ErrorCode.IDEMPOTENCY_CONFLICT,
                    "This requestId already created something from a different command.",
                    meta={"reason": "idempotency_key_reused"},
                )
            if existing.result_reference is None:
                raise ToolError(
                    ErrorCode.ACTION_POLICY_REQUIRED,
                    "An earlier execution claimed this command but recorded no result; it is "
                    "not run again. Report this request id to the operator.",
                    meta={"reason": "claim_incomplete", "requestId": entry.request_id},
                )
            taken.append(CommandClaim(prior=existing.result_reference, record=_already_recorded))
            return taken[0]
        await tx.insert_claim(
            ClaimRecord(
                **entry.request_key(),
                capability_id=entry.capability_id,
                fingerprint=entry.fingerprint,
                created_at=clock(),
            )
        )

        async def record(reference: str) -> None:
            if not reference or any(c.isspace() for c in reference) or ":" not in reference:
                raise ToolError(
                    ErrorCode.INVALID_OUTPUT,
                    "A result reference must look like '<type>:<id>' without whitespace.",
                    meta={"reason": "malformed_result_reference"},
                )
            await tx.record_claim_result(
                entry.tenant_id, entry.principal_id, entry.request_id, reference
            )

        taken.append(CommandClaim(prior=None, record=record))
        return taken[0]

    return claim


async def _already_recorded(reference: str) -> None:
    raise ToolError(
        ErrorCode.ACTION_POLICY_REQUIRED,
        "This command's result was recorded by an earlier execution; return claim.prior.",
        meta={"reason": "claim_already_recorded"},
    )
