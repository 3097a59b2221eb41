"""The OpenAPI document's fixed components: payload schemas, problem responses, headers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from . import _payloads, _payloads_content
from ._problem import PROBLEM_MEDIA_TYPE

__all__ = (
    "SCHEMAS",
    "control_parameters",
    "payload_schemas",
    "problem_refs",
    "problem_responses",
)

SCHEMAS = "#/components/schemas/"

_PROBLEM_STATUSES: Mapping[int, str] = {
    400: "Malformed request: the body is not strict JSON, a header is malformed or "
    "repeated, a "
    "control was sent twice with different values, or the request carries more than one "
    "credential (ambiguous_credentials).",
    401: "Missing or invalid credentials.",
    403: "Not allowed: missing scopes, another tenant, an approval that does not match, "
    "or a denial.",
    404: "Unknown, or not visible to the caller.",
    409: "The same request is still running; retry with the same Idempotency-Key.",
    413: "The body, or a string or number in it, is too large.",
    415: "The body is not declared JSON: send it with Content-Type: application/json "
    "(unsupported_media_type).",
    422: "Invalid input, a request id reused for a different call, or an effect not in a "
    "state the action applies to.",
    429: "A rate limit or quota is spent (RATE_LIMITED); retry after Retry-After seconds.",
    500: "The server failed; the problem carries only an error id.",
    502: "An upstream MCP server ran the call and reported an error (UPSTREAM_ERROR); its "
    "result is in meta.result.",
    503: "Unavailable: cancelled, a missing service, or a dependency that is down.",
    504: "The tool timed out; retry with the same Idempotency-Key.",
}


def payload_schemas() -> dict[str, Any]:
    """Component schemas of the transport's own payloads, named without the ``Body`` suffix."""
    responses: list[type[BaseModel]] = [
        _payloads.AcceptedBody,
        _payloads.ActionStatusBody,
        _payloads.ApprovalBody,
        _payloads.ApprovalListBody,
        _payloads.AuditBody,
        _payloads.BudgetsBody,
        _payloads.CallResultBody,
        _payloads.EffectsBody,
        _payloads.HealthBody,
        _payloads.ProblemBody,
        _payloads.ReadyBody,
        _payloads_content.PromptListBody,
        _payloads_content.PromptResultBody,
        _payloads_content.ResourceListBody,
        _payloads_content.ResourceReadBody,
        _payloads.ToolListBody,
        _payloads.UpstreamsBody,
        _payloads.WhoamiBody,
    ]
    _, top = models_json_schema(
        [(model, "serialization") for model in responses]
        + [(_payloads.DecisionBody, "validation")],
        by_alias=True,
        ref_template=SCHEMAS + "{model}",
    )
    defs: dict[str, Any] = top.get("$defs", {})
    renamed = {name: name.removesuffix("Body") for name in defs}
    out: dict[str, Any] = {}
    for name, schema in defs.items():
        out[renamed[name]] = _rename_refs(schema, renamed)
    return out


def _rename_refs(node: Any, renamed: Mapping[str, str]) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(SCHEMAS):
                name = value[len(SCHEMAS) :]
                value = SCHEMAS + renamed.get(name, name)
            out[key] = _rename_refs(value, renamed)
        return out
    if isinstance(node, list):
        return [_rename_refs(item, renamed) for item in node]
    return node


def problem_responses() -> dict[str, Any]:
    """One ``ProblemNNN`` response per status, with the headers that status carries."""
    out: dict[str, Any] = {}
    for status, description in _PROBLEM_STATUSES.items():
        response: dict[str, Any] = {
            "description": description,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": SCHEMAS + "Problem"}}},
        }
        headers: dict[str, Any] = {}
        if status in (401, 403):
            headers["WWW-Authenticate"] = {
                "description": "The Bearer challenge (insufficient_scope names the missing "
                "scopes).",
                "schema": {"type": "string"},
            }
        if status in (409, 429, 503):
            headers["Retry-After"] = {
                "description": "Seconds to wait before retrying, when retryable.",
                "schema": {"type": "string"},
            }
        if status == 429:
            headers["RateLimit"] = {
                "description": 'The spent limit (IETF RateLimit fields): "<name>";r=0;t=<s>.',
                "schema": {"type": "string"},
            }
            headers["RateLimit-Policy"] = {
                "description": 'Its policy: "<name>";q=<quota>;w=<window seconds>.',
                "schema": {"type": "string"},
            }
        if headers:
            response["headers"] = headers
        out[f"Problem{status}"] = response
    return out


def problem_refs(statuses: Iterable[int]) -> dict[str, Any]:
    """References to the problem responses of ``statuses``, keyed by status."""
    return {str(s): {"$ref": f"#/components/responses/Problem{s}"} for s in statuses}


def control_parameters() -> dict[str, Any]:
    """The header parameters that carry a call's controls (request id, confirm, approval)."""
    return {
        "IdempotencyKey": {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "description": "The request id (a UUID; a quoted RFC 8941 string works too). "
            "Same key and same arguments replay the stored result; other arguments are 422.",
            "schema": {"type": "string", "format": "uuid"},
        },
        "CharterConfirm": {
            "name": "Charter-Confirm",
            "in": "header",
            "required": False,
            "description": "true once the user confirmed the action.",
            "schema": {"type": "string", "enum": ["true", "false"]},
        },
        "CharterApproval": {
            "name": "Charter-Approval",
            "in": "header",
            "required": False,
            "description": "The id of a granted approval for this exact call.",
            "schema": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "pattern": r"^\S(.*\S)?$",
            },
        },
    }
