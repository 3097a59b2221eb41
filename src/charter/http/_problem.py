"""Failures as RFC 9457 ``application/problem+json``: one table from ``ErrorCode`` to status.

The status follows the code. A few reasons of ``INVALID_INPUT`` say more precisely what
is wrong with the request and get their own status: a body that is not strict JSON, or
controls that disagree, is 400; anything too large is 413. A 500 carries only an error id:
the message and details stay in the server's log (``charter._redaction``, the rule every
transport shares).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import JsonValue
from pydantic.alias_generators import to_camel
from starlette.responses import Response

from charter._redaction import SERVER_FAULT_CODES, redact
from charter._wording import scope_challenge
from charter.errors import DEFAULT_NEXT_STEPS, ErrorCode
from charter.outcome import Denied, Failed

from ._payloads import ProblemBody

__all__ = (
    "DENIED_PROBLEM_TYPE",
    "PROBLEM_MEDIA_TYPE",
    "STATUS_BY_CODE",
    "STATUS_BY_REASON",
    "denied_problem",
    "failed_problem",
    "http_problem",
    "invalid_input",
    "problem_response",
    "rate_limit_headers",
    "status_for",
)

PROBLEM_MEDIA_TYPE = "application/problem+json"

STATUS_BY_CODE: Mapping[ErrorCode, tuple[int, str]] = {
    ErrorCode.NOT_FOUND: (404, "Not found"),
    ErrorCode.INVALID_INPUT: (422, "Invalid input"),
    ErrorCode.INVALID_OUTPUT: (500, "Internal error"),
    ErrorCode.UNAUTHENTICATED: (401, "Authentication required"),
    ErrorCode.AUTHORIZATION_DENIED: (403, "Not allowed"),
    ErrorCode.CONFIRMATION_REQUIRED: (403, "Confirmation required"),
    ErrorCode.APPROVAL_REQUIRED: (403, "Approval required"),
    ErrorCode.ACTION_POLICY_REQUIRED: (403, "Action policy required"),
    ErrorCode.IDEMPOTENCY_CONFLICT: (422, "Request id reused"),
    ErrorCode.REQUEST_IN_PROGRESS: (409, "Request in progress"),
    ErrorCode.TIMEOUT: (504, "Timed out"),
    # 499 is not a registered status, and a client that went away reads no answer: the
    # only reader of CANCELLED is a caller whose call the server cancelled (shutdown).
    ErrorCode.CANCELLED: (503, "Cancelled"),
    ErrorCode.MISSING_SERVICE: (503, "Service missing"),
    ErrorCode.PROVIDER_ERROR: (500, "Internal error"),
    ErrorCode.PROVIDER_UNAVAILABLE: (503, "Dependency unavailable"),
    ErrorCode.RATE_LIMITED: (429, "Too many requests"),
    ErrorCode.UPSTREAM_ERROR: (502, "Upstream error"),
}
"""Status and title for every error code; a test fails when a code is missing."""

STATUS_BY_REASON: Mapping[str, tuple[int, str]] = {
    # The body is not a JSON text charter accepts: syntax, encoding, duplicate keys,
    # NaN/Infinity or a number a double cannot hold.
    "invalid_json": (400, "Malformed request"),
    "invalid_utf8": (400, "Malformed request"),
    "duplicate_key": (400, "Malformed request"),
    "non_finite_number": (400, "Malformed request"),
    # A header is malformed, or a control was given in a header and in the body differently.
    "invalid_header": (400, "Malformed request"),
    "controls_conflict": (400, "Malformed request"),
    # The body, a string or an integer in it is larger than the limits.
    "input_too_large": (413, "Content too large"),
    # A body that is not declared JSON (``_media_type``).
    "unsupported_media_type": (415, "Unsupported media type"),
}
"""Reasons of ``INVALID_INPUT`` that override the code's 422."""

_RETRY_AFTER_SECONDS = "1"


def status_for(code: ErrorCode, reason: str | None = None) -> tuple[int, str]:
    """The HTTP status and title for an error code and its finer reason."""
    if code is ErrorCode.INVALID_INPUT and reason is not None and reason in STATUS_BY_REASON:
        return STATUS_BY_REASON[reason]
    return STATUS_BY_CODE[code]


def problem_response(problem: ProblemBody, headers: Mapping[str, str] | None = None) -> Response:
    """Render a problem with its media type."""
    return Response(
        problem.model_dump_json(exclude_none=True),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=dict(headers or {}),
    )


def failed_problem(failed: Failed) -> Response:
    """Render a ``Failed`` outcome, with the headers its status calls for."""
    status, title = status_for(failed.code, failed.reason)
    headers: dict[str, str] = {}
    if failed.code in SERVER_FAULT_CODES:
        return problem_response(_server_error(redact(failed), status, title))
    if failed.code is ErrorCode.UNAUTHENTICATED:
        headers["WWW-Authenticate"] = "Bearer"
    elif failed.code is ErrorCode.AUTHORIZATION_DENIED and failed.reason == "insufficient_scope":
        missing = (failed.meta or {}).get("missing")
        headers["WWW-Authenticate"] = scope_challenge(
            [s for s in missing if isinstance(s, str)] if isinstance(missing, list) else []
        )
    if failed.code is ErrorCode.RATE_LIMITED:
        headers.update(rate_limit_headers(failed))
    elif status in (409, 503) and failed.retryable:
        headers["Retry-After"] = _RETRY_AFTER_SECONDS
    meta = {k: v for k, v in (failed.meta or {}).items() if k != "reason"}
    problem = ProblemBody(
        type=_type(failed.code),
        title=title,
        status=status,
        detail=failed.message,
        code=failed.code.value,
        reason=failed.reason,
        next_steps=list(failed.next_steps),
        retryable=failed.retryable,
        meta=meta or None,
        replayed=True if failed.replayed else None,
    )
    return problem_response(problem, headers)


def rate_limit_headers(failed: Failed) -> dict[str, str]:
    """``Retry-After`` and the IETF ``RateLimit`` and ``RateLimit-Policy`` fields of a refusal.

    The fields follow draft-ietf-httpapi-ratelimit-headers (structured fields): the policy
    named by the limit, its quota ``q`` and window ``w``; nothing ``r`` remains until
    ``t`` seconds from now.
    """
    meta = failed.meta or {}
    name = _sf_string(str(meta.get("limit", "limit")))
    headers: dict[str, str] = {}
    wait = meta.get("retryAfter")
    if not failed.retryable or not isinstance(wait, int | float):
        return headers
    seconds = max(1, math.ceil(wait))
    headers["Retry-After"] = str(seconds)
    headers["RateLimit"] = f"{name};r=0;t={seconds}"
    quota, window = meta.get("quota"), meta.get("window")
    if isinstance(quota, int) and isinstance(window, int | float):
        headers["RateLimit-Policy"] = f"{name};q={quota};w={max(1, math.ceil(window))}"
    return headers


def _sf_string(text: str) -> str:
    """``text`` as a structured-field string (RFC 8941): printable ASCII, quoted, escaped."""
    printable = "".join(c if " " <= c <= "~" else "?" for c in text)
    return '"' + printable.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _server_error(redacted: Failed, status: int, title: str) -> ProblemBody:
    """A 500 that says only that it failed and under which error id."""
    return ProblemBody(
        type=_type(redacted.code),
        title=title,
        status=status,
        detail=redacted.message,
        code=redacted.code.value,
        next_steps=list(redacted.next_steps),
        retryable=redacted.retryable,
        error_id=str((redacted.meta or {})["errorId"]),
    )


def denied_problem(denied: Denied) -> Response:
    """Render a ``Denied`` outcome: a decision, not an error, so 403 with who and why."""
    meta: dict[str, JsonValue] = {
        key: value
        for key, value in denied.model_dump(
            mode="json", by_alias=False, exclude={"kind", "reason", "next_steps"}
        ).items()
        if value is not None
    }
    return problem_response(
        ProblemBody(
            type=DENIED_PROBLEM_TYPE,
            title="Denied",
            status=403,
            detail=denied.reason,
            code=ErrorCode.AUTHORIZATION_DENIED.value,
            reason=denied.cause or "denied",
            next_steps=list(denied.next_steps)
            or ["The call was refused; do not retry it unchanged."],
            meta={to_camel(k): v for k, v in meta.items()} or None,
        )
    )


DENIED_PROBLEM_TYPE = "urn:charter:denied"
"""The problem type of a decision to refuse (a person denied it, or it expired)."""


def http_problem(
    status: int,
    title: str,
    detail: str,
    *,
    code: ErrorCode | None = None,
    reason: str | None = None,
    headers: Mapping[str, str] | None = None,
    meta: Mapping[str, str] | None = None,
    retryable: bool = False,
    next_steps: Sequence[str] | None = None,
) -> Response:
    """A problem the transport itself answers (routing, credentials, query parameters).

    ``next_steps`` default to the code's (none without a code).
    """
    if next_steps is None:
        next_steps = DEFAULT_NEXT_STEPS[code] if code is not None else ()
    return problem_response(
        ProblemBody(
            type=_type(code) if code is not None else "about:blank",
            title=title,
            status=status,
            detail=detail,
            code=code.value if code is not None else None,
            reason=reason,
            next_steps=list(next_steps),
            retryable=retryable,
            meta=dict(meta) if meta else None,
        ),
        headers,
    )


def invalid_input(detail: str, reason: str, **meta: str) -> Response:
    """An ``INVALID_INPUT`` the transport answers, with the status and title of its reason."""
    status, title = status_for(ErrorCode.INVALID_INPUT, reason)
    return http_problem(
        status, title, detail, code=ErrorCode.INVALID_INPUT, reason=reason, meta=meta
    )


def _type(code: ErrorCode) -> str:
    return f"urn:charter:error:{code.value}"
