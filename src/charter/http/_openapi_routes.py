"""The fixed part of the OpenAPI document: routes, payload schemas, problems, headers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ._payloads import (
    AcceptedBody,
    ActionStatusBody,
    ApprovalBody,
    ApprovalListBody,
    AuditBody,
    BudgetsBody,
    CallResultBody,
    DecisionBody,
    EffectsBody,
    HealthBody,
    ProblemBody,
    ReadyBody,
    ToolListBody,
    UpstreamsBody,
    WhoamiBody,
)
from ._payloads_content import (
    PromptListBody,
    PromptResultBody,
    ResourceListBody,
    ResourceReadBody,
)
from ._problem import PROBLEM_MEDIA_TYPE

__all__ = (
    "SCHEMAS",
    "control_parameters",
    "fixed_paths",
    "payload_schemas",
    "problem_refs",
    "problem_responses",
)

SCHEMAS = "#/components/schemas/"

_PROBLEM_STATUSES: Mapping[int, str] = {
    400: "Malformed request: the body is not strict JSON, a header is malformed, a "
    "control was sent twice with different values, or the request carries more than one "
    "credential (ambiguous_credentials).",
    401: "Missing or invalid credentials.",
    403: "Not allowed: missing scopes, another tenant, an approval that does not match, "
    "or a denial.",
    404: "Unknown, or not visible to the caller.",
    409: "The same request is still running; retry with the same Idempotency-Key.",
    413: "The body, or a string or number in it, is too large.",
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
        AcceptedBody,
        ActionStatusBody,
        ApprovalBody,
        ApprovalListBody,
        AuditBody,
        BudgetsBody,
        CallResultBody,
        EffectsBody,
        HealthBody,
        ProblemBody,
        ReadyBody,
        PromptListBody,
        PromptResultBody,
        ResourceListBody,
        ResourceReadBody,
        ToolListBody,
        UpstreamsBody,
        WhoamiBody,
    ]
    _, top = models_json_schema(
        [(model, "serialization") for model in responses] + [(DecisionBody, "validation")],
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
    return {str(s): {"$ref": f"#/components/responses/Problem{s}"} for s in statuses}


def control_parameters() -> dict[str, Any]:
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


def _json_content(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": SCHEMAS + name}}}


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "minLength": 1},
    }


def _query(name: str, schema: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    """An optional query parameter."""
    parameter: dict[str, Any] = {"name": name, "in": "query", "required": False}
    if description is not None:
        parameter["description"] = description
    parameter["schema"] = schema
    return parameter


def _query_limit(default: int) -> dict[str, Any]:
    return _query("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": default})


def _query_tenant() -> dict[str, Any]:
    return _query("tenant", {"type": "string"}, "Another tenant (admin scope only).")


_SECURED: list[dict[str, list[str]]] = [{"bearerAuth": []}, {"apiKeyAuth": []}]


def _operation(
    operation_id: str,
    summary: str,
    *,
    tag: str,
    ok: str,
    problems: Iterable[int],
    parameters: Iterable[dict[str, Any]] = (),
    secured: bool | None = True,
    request: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One fixed operation; ``secured`` None means public, False means credentials optional.

    Any operation that reads credentials (it may answer 401) may also answer 400 for two
    of them (``charter._credentials``).
    """
    problems = _with_ambiguous_credentials(problems)
    operation: dict[str, Any] = {
        "tags": [tag],
        "operationId": operation_id,
        "summary": summary,
        "responses": {
            "200": {"description": "OK", "content": _json_content(ok)},
            **problem_refs(problems),
        },
    }
    params = list(parameters)
    if params:
        operation["parameters"] = params
    if request is not None:
        operation["requestBody"] = request
    if secured is None:
        operation["security"] = []
    elif secured:
        operation["security"] = _SECURED
    return operation


def _with_ambiguous_credentials(problems: Iterable[int]) -> list[int]:
    statuses = set(problems)
    if 401 in statuses:
        statuses.add(400)
    return sorted(statuses)


def _effect_action(operation_id: str, summary: str) -> dict[str, Any]:
    """``POST /v1/effects/{key}:<action>``: an admin changes one effect, answered as it is now."""
    return {
        "post": _operation(
            operation_id,
            summary,
            tag="operations",
            ok="Effect",
            problems=(401, 403, 404, 422, 503),
            parameters=[_path_param("key", "The effect's key (eff_…).")],
        )
    }


def fixed_paths() -> dict[str, Any]:
    approval_id = _path_param("approval_id", "The approval's id (apr_…).")
    decision = {
        "required": False,
        "content": _json_content("Decision"),
    }
    return {
        "/v1/tools": {
            "get": _operation(
                "listTools",
                "The tools the caller may call, as manifest entries.",
                tag="tools",
                ok="ToolList",
                problems=(401,),
                secured=False,
            )
        },
        "/v1/tools/{name}": {
            "get": {
                **_operation(
                    "getTool",
                    "One manifest entry, by name or alias.",
                    tag="tools",
                    ok="ToolList",
                    problems=(401, 404),
                    parameters=[_path_param("name", "A tool name or alias.")],
                    secured=False,
                ),
                "responses": {
                    "200": {
                        "description": "The manifest entry (see docs/manifest-format.md).",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **problem_refs((400, 401, 404)),
                },
            }
        },
        "/v1/resources": {
            "get": _operation(
                "listResources",
                "The resources and resource templates the caller may read.",
                tag="resources",
                ok="ResourceList",
                problems=(401,),
                secured=False,
            )
        },
        "/v1/resources/{uri}": {
            "get": _operation(
                "readResource",
                "Read one resource (or a URI a resource template matches).",
                tag="resources",
                ok="ResourceRead",
                problems=(401, 403, 404, 422),
                parameters=[
                    _path_param("uri", "The resource URI, percent-encoded (trip%3A%2F%2FT-1).")
                ],
                secured=False,
            )
        },
        "/v1/prompts": {
            "get": _operation(
                "listPrompts",
                "The prompts the caller may get.",
                tag="prompts",
                ok="PromptList",
                problems=(401,),
                secured=False,
            )
        },
        "/v1/prompts/{name}:get": {
            "post": _operation(
                "getPrompt",
                "A prompt's messages, built from its string arguments.",
                tag="prompts",
                ok="PromptResult",
                problems=(401, 403, 404, 413, 422),
                parameters=[_path_param("name", "The prompt's name.")],
                secured=False,
                request={
                    "required": False,
                    "description": "The arguments: an object of strings (empty: none).",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "additionalProperties": {"type": "string"},
                            }
                        }
                    },
                },
            )
        },
        "/v1/actions/{request_id}": {
            "get": _operation(
                "getActionStatus",
                "Where one of the caller's requests stands.",
                tag="operations",
                ok="ActionStatus",
                problems=(401, 404),
                parameters=[_path_param("request_id", "The request id (Idempotency-Key).")],
            )
        },
        "/v1/approvals": {
            "get": _operation(
                "listApprovals",
                "Approvals in the caller's tenant (approvers see all, others their own).",
                tag="approvals",
                ok="ApprovalList",
                problems=(401, 422),
                parameters=[
                    _query(
                        "status",
                        {
                            "type": "string",
                            "enum": ["pending", "approved", "denied", "consumed", "all"],
                            "default": "pending",
                        },
                    ),
                    _query_limit(100),
                ],
            )
        },
        "/v1/approvals/{approval_id}": {
            "get": _operation(
                "getApproval",
                "One approval the caller may see.",
                tag="approvals",
                ok="Approval",
                problems=(401, 404),
                parameters=[approval_id],
            )
        },
        "/v1/approvals/{approval_id}:grant": {
            "post": _operation(
                "grantApproval",
                "Grant a pending approval (scope charter:approve, same tenant, not your own).",
                tag="approvals",
                ok="Approval",
                problems=(400, 401, 403, 404, 413, 422),
                parameters=[approval_id],
                request=decision,
            )
        },
        "/v1/approvals/{approval_id}:deny": {
            "post": _operation(
                "denyApproval",
                "Deny a pending approval, or revoke a granted one that was not used yet.",
                tag="approvals",
                ok="Approval",
                problems=(400, 401, 403, 404, 413, 422),
                parameters=[approval_id],
                request=decision,
            )
        },
        "/v1/audit": {
            "get": _operation(
                "listAuditEvents",
                "Recent audit events of the caller's tenant (admins may name another).",
                tag="operations",
                ok="Audit",
                problems=(401, 403, 422),
                parameters=[
                    _query_tenant(),
                    _query_limit(50),
                ],
            )
        },
        "/v1/limits": {
            "get": _operation(
                "listBudgets",
                "The rate limits and quotas being spent by calls for the caller's tenant.",
                tag="operations",
                ok="Budgets",
                problems=(401, 403, 503),
                parameters=[
                    _query_tenant(),
                ],
            )
        },
        "/v1/effects": {
            "get": _operation(
                "listEffects",
                "The effect outbox of the caller's tenant: effects staged by calls (or host "
                "code) and where their delivery stands. Approvers and admins see all of the "
                "tenant's; other callers those their own calls staged.",
                tag="operations",
                ok="Effects",
                problems=(401, 403, 422, 503),
                parameters=[
                    _query_tenant(),
                    _query(
                        "status",
                        {"type": "string", "enum": ["pending", "delivered", "dead", "discarded"]},
                        "Only effects in this state.",
                    ),
                    _query(
                        "requestId", {"type": "string"}, "Only the effects this request staged."
                    ),
                    _query_limit(100),
                ],
            )
        },
        "/v1/effects/{key}:retry": _effect_action(
            "retryEffect",
            "Re-drive a dead or discarded effect: pending again, with fresh attempts "
            "(admin scope; audited as effect.retry).",
        ),
        "/v1/effects/{key}:discard": _effect_action(
            "discardEffect",
            "Give up on a pending or dead effect: kept, never run again (admin scope; "
            "audited as effect.discard).",
        ),
        "/v1/upstreams": {
            "get": _operation(
                "listUpstreams",
                "The upstream MCP servers whose tools this server governs, and their health.",
                tag="operations",
                ok="Upstreams",
                problems=(401,),
            )
        },
        "/v1/whoami": {
            "get": _operation(
                "whoami",
                "The authenticated caller.",
                tag="operations",
                ok="Whoami",
                problems=(401,),
            )
        },
        "/v1/openapi.json": {
            "get": {
                **_operation(
                    "getOpenAPI",
                    "This document, listing the tools the caller may call.",
                    tag="operations",
                    ok="Health",
                    problems=(401,),
                    secured=False,
                ),
                "responses": {
                    "200": {
                        "description": "An OpenAPI 3.1 document.",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **problem_refs((400, 401)),
                },
            }
        },
        "/healthz": {
            "get": _operation(
                "healthz",
                "The process answers.",
                tag="operations",
                ok="Health",
                problems=(),
                secured=None,
            )
        },
        "/readyz": {
            "get": _operation(
                "readyz",
                "The store answers and, with a gateway, every upstream MCP server is connected.",
                tag="operations",
                ok="Ready",
                problems=(503,),
                secured=None,
            )
        },
    }
