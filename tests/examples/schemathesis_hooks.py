"""schemathesis hooks for the demo's conformance run (``SCHEMATHESIS_HOOKS``).

One check: schemathesis's own ``positive_data_acceptance``, except for the refusals no
OpenAPI document can rule out, each named by its problem ``reason`` on the operations it
can happen on (docs/http.md, "Conformance with its own OpenAPI"). Every other rejection of
schema-valid data still fails the run.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance

CALL_REFUSALS = frozenset(
    {
        # The request id was used for other arguments before: state (and in deterministic
        # mode schemathesis generates the same UUID for every operation).
        "idempotency_key_reused",
        # (422.) A write needs a request id, from the Idempotency-Key header or in `_charter`:
        # "one of a header and a body field" is not expressible in OpenAPI.
        "request_id_required",
        # (400.) The same control sent as a header and in `_charter` with different values: each
        # location's schema is right alone; that they must agree is not expressible.
        "controls_conflict",
    }
)
STATEFUL_REFUSALS: dict[str, frozenset[str]] = {
    # The call to ask approval for is `tool` + `arguments`: whether it is valid, accepts
    # those controls and needs an approval depends on the named tool (and its state).
    "POST /v1/tools/request_action_approval:call": CALL_REFUSALS
    | {"control_not_accepted", "approval_not_required", "already_executed", "invalid_input"},
    # Whether a cursor is one a page gave is state; the document states only its form.
    "GET /v1/approvals": frozenset({"invalid_cursor"}),
    # One route serves every prompt; which arguments a prompt requires is per prompt
    # (listed by GET /v1/prompts), so the generic body schema is an object of strings.
    "POST /v1/prompts/{name}:get": frozenset({"invalid_arguments"}),
}


def _allowed(label: str) -> frozenset[str]:
    if label in STATEFUL_REFUSALS:
        return STATEFUL_REFUSALS[label]
    if label.startswith("POST /v1/tools/") and label.endswith(":call"):
        return CALL_REFUSALS
    return frozenset()


_UNNAMED_FORMAT_CHARACTER = "must not hold control or format characters"
"""The refusal of an invocation control holding a character its pattern cannot refuse in
both ECMA-262 and Python (``charter.auth.IDENTITY_PATTERN``): a format character past
U+FFFF, or a final newline (Python's ``$`` matches before one, which hypothesis uses)."""


def _problem(body: bytes) -> dict[str, Any]:
    try:
        problem = json.loads(body)
    except ValueError:
        return {}
    return problem if isinstance(problem, dict) else {}


def _unnamed_control_character(problem: dict[str, Any]) -> bool:
    """Whether ``problem`` refuses controls for characters the schema's pattern cannot name."""
    issues = (problem.get("meta") or {}).get("issues") or []
    return (
        problem.get("reason") == "invalid_controls"
        and bool(issues)
        and all(_UNNAMED_FORMAT_CHARACTER in str(issue.get("msg")) for issue in issues)
    )


@schemathesis.check
def positive_data_acceptance_but_state(ctx: Any, response: Any, case: Any) -> bool | None:
    """``positive_data_acceptance``, but a 400 or 422 for a documented reason passes."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except AssertionError:
        if response.status_code not in (400, 422):
            raise
        problem = _problem(response.content)
        if problem.get("reason") in _allowed(case.operation.label):
            return None
        if _unnamed_control_character(problem):
            return None
        raise
