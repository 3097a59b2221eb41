"""``/v1/approvals``: list, read, grant and deny, each a call to ``host.approvals``."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import get_args

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from charter._limits import PayloadRejected, parse_json
from charter.auth import Principal, holds_control_character
from charter.errors import ErrorCode
from charter.host import Host
from charter.ledger import ApprovalCursor, ApprovalRecord, ListedStatus
from charter.outcome import Failed, failed, not_found

from ._authentication import required_caller
from ._media_type import unsupported_body
from ._payloads import ApprovalBody, ApprovalListBody, DecisionBody
from ._problem import failed_problem, invalid_input
from ._responses import json_response

__all__ = (
    "ApprovalRoutes",
    "bad_query",
    "decode_cursor",
    "encode_cursor",
    "int_query",
    "listing_caller",
)

_STATUSES: dict[str, ListedStatus | None] = {
    **{status: status for status in get_args(ListedStatus)},
    "all": None,
}


class ApprovalRoutes:
    """The endpoints under ``/v1/approvals`` for one host."""

    def __init__(self, host: Host) -> None:
        """Serve ``host``'s approvals."""
        self.host = host

    async def list_approvals(self, request: Request) -> Response:
        """``GET /v1/approvals?status=pending&limit=100&before=<next>``: newest first, paged."""
        caller = required_caller(request)
        if isinstance(caller, Response):
            return caller
        status = request.query_params.get("status", "pending")
        if status not in _STATUSES:
            return bad_query("status", f"must be one of {', '.join(_STATUSES)}")
        limit = int_query(request, "limit", default=100, maximum=500)
        if isinstance(limit, Response):
            return limit
        before = _cursor_query(request)
        if isinstance(before, Response):
            return before
        # One more than the page: whether it exists says whether there is a next page.
        records = await self.host.approvals.list(
            caller, _STATUSES[status], limit + 1, before=before
        )
        page = records[:limit]
        more = len(records) > limit
        return json_response(
            ApprovalListBody(
                approvals=[self._body(r) for r in page],
                next=encode_cursor(page[-1].cursor) if more else None,
            )
        )

    async def get_approval(self, request: Request) -> Response:
        """``GET /v1/approvals/{approval_id}``: 404 unless the caller may see it."""
        caller = required_caller(request)
        if isinstance(caller, Response):
            return caller
        approval_id: str = request.path_params["approval_id"]
        record = await self.host.approvals.get(caller, approval_id)
        if record is None:
            return failed_problem(_not_found(approval_id))
        return json_response(self._body(record))

    async def grant(self, request: Request) -> Response:
        """``POST /v1/approvals/{approval_id}:grant`` with an optional ``{"reason": …}``."""
        return await self._decide(request, grant=True)

    async def deny(self, request: Request) -> Response:
        """``POST /v1/approvals/{approval_id}:deny`` with an optional ``{"reason": …}``."""
        return await self._decide(request, grant=False)

    async def _decide(self, request: Request, *, grant: bool) -> Response:
        caller = required_caller(request)
        if isinstance(caller, Response):
            return caller
        unsupported = unsupported_body(request.scope)
        if unsupported is not None:
            return unsupported
        decision = await self._decision(request)
        if isinstance(decision, Failed):
            return failed_problem(decision)
        approval_id: str = request.path_params["approval_id"]
        # Someone who may not even see the approval gets the same 404 as for a missing one.
        if await self.host.approvals.get(caller, approval_id) is None:
            return failed_problem(_not_found(approval_id))
        decide = self.host.approvals.grant if grant else self.host.approvals.deny
        result = await decide(approval_id, caller, decision.reason)
        if isinstance(result, Failed):
            return failed_problem(result)
        return json_response(self._body(result))

    async def _decision(self, request: Request) -> DecisionBody | Failed:
        raw = await request.body()
        if not raw.strip():
            return DecisionBody()
        try:
            value = parse_json(raw, self.host.limits)
            return DecisionBody.model_validate(value)
        except PayloadRejected as exc:
            return failed(
                ErrorCode.INVALID_INPUT, f"The body was rejected: {exc}", reason=exc.reason
            )
        except ValidationError as exc:
            issues = exc.errors(include_input=False, include_url=False, include_context=False)
            return failed(
                ErrorCode.INVALID_INPUT,
                'The body must be {"reason": "<text>"} or empty.',
                reason="validation_failed",
                issues=[
                    {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
                    for e in issues
                ],
            )

    def _body(self, record: ApprovalRecord) -> ApprovalBody:
        registered = self.host.registry.get(record.tool)
        return ApprovalBody.from_record(
            record,
            description=registered.tool.description if registered is not None else None,
            tier=registered.tool.tier.value if registered is not None else None,
            now=self.host.approvals.clock(),
        )


_LIST_APPROVALS = "List the pending approvals with GET /v1/approvals and use one of their ids."


def _not_found(approval_id: str) -> Failed:
    return not_found("approval", approval_id, "in your tenant", next_step=_LIST_APPROVALS)


def encode_cursor(cursor: ApprovalCursor) -> str:
    """An approval cursor as the opaque ``next``/``before`` text (base64url, no padding)."""
    at, approval_id = cursor
    raw = f"{at.isoformat(timespec='microseconds')} {approval_id}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(text: str) -> ApprovalCursor | None:
    """The cursor ``encode_cursor`` wrote, or None for any other text."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        stamp, _, approval_id = raw.partition(" ")
        at = datetime.fromisoformat(stamp)
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return None
    if at.tzinfo is None or not approval_id or holds_control_character(approval_id):
        return None
    return at, approval_id


_BAD_CURSOR = "must be the 'next' of an earlier page of GET /v1/approvals"


def _cursor_query(request: Request) -> ApprovalCursor | Response | None:
    """The ``before`` query parameter, decoded (None when not sent), or the 422 for it."""
    text = request.query_params.get("before")
    if text is None:
        return None
    cursor = decode_cursor(text) if len(text) <= 400 and text.isascii() else None
    if cursor is not None:
        return cursor
    # Its own reason: the OpenAPI document states a cursor's form, not which ones a page gave.
    return invalid_input(
        f"The query parameter 'before' {_BAD_CURSOR}.", "invalid_cursor", parameter="before"
    )


def listing_caller(request: Request, *, default_limit: int) -> tuple[Principal, int] | Response:
    """The caller of a listing route and its ``limit`` (1-500), or the 401 or 422 to answer."""
    caller = required_caller(request)
    if isinstance(caller, Response):
        return caller
    limit = int_query(request, "limit", default=default_limit, maximum=500)
    if isinstance(limit, Response):
        return limit
    return caller, limit


def int_query(request: Request, name: str, *, default: int, maximum: int) -> int | Response:
    """A positive integer query parameter no larger than ``maximum``, or the 422 for it."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9 and 1 <= int(raw) <= maximum):
        return bad_query(name, f"must be an integer from 1 to {maximum}")
    return int(raw)


def bad_query(name: str, message: str) -> Response:
    return invalid_input(
        f"The query parameter {name!r} {message}.", "invalid_query", parameter=name
    )
