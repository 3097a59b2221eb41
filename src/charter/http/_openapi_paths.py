"""The OpenAPI document's fixed routes: one operation per route the REST transport serves.

Each operation is built by ``_operation`` from its summary, tag, payload and the problem
statuses it may answer (components in ``_openapi_components``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._openapi_components import SCHEMAS, problem_refs

__all__ = ("fixed_paths",)


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
    ok: str | None,
    problems: Iterable[int],
    ok_description: str = "OK",
    parameters: Iterable[dict[str, Any]] = (),
    secured: bool | None = True,
    request: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One fixed operation; ``secured`` None means public, False means credentials optional.

    ``ok`` names the 200 payload's component; None means any JSON object, described by
    ``ok_description``.

    Any operation that reads credentials (it may answer 401) may also answer 400 for two
    of them (``charter._credentials``).
    """
    problems = _with_ambiguous_credentials(problems)
    operation: dict[str, Any] = {
        "tags": [tag],
        "operationId": operation_id,
        "summary": summary,
        "responses": {
            "200": {
                "description": ok_description,
                "content": _json_content(ok)
                if ok is not None
                else {"application/json": {"schema": {"type": "object"}}},
            },
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
            parameters=[_effect_key()],
        )
    }


def _effect_key() -> dict[str, Any]:
    return _path_param("key", "The effect's key (eff_…).")


def _approval_decision(operation_id: str, summary: str) -> dict[str, Any]:
    """``POST /v1/approvals/{approval_id}:<decision>``: an approver decides, with a reason."""
    return {
        "post": _operation(
            operation_id,
            summary,
            tag="approvals",
            ok="Approval",
            problems=(400, 401, 403, 404, 413, 415, 422),
            parameters=[_approval_id()],
            request={"required": False, "content": _json_content("Decision")},
        )
    }


def _approval_id() -> dict[str, Any]:
    return _path_param("approval_id", "The approval's id (apr_…).")


def fixed_paths() -> dict[str, Any]:
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
            "get": _operation(
                "getTool",
                "One manifest entry, by name or alias.",
                tag="tools",
                ok=None,
                ok_description="The manifest entry (see docs/manifest-format.md).",
                problems=(401, 404),
                parameters=[_path_param("name", "A tool name or alias.")],
                secured=False,
            )
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
                problems=(401, 403, 404, 413, 415, 422),
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
                            "enum": ["pending", "approved", "denied", "consumed", "expired", "all"],
                            "default": "pending",
                        },
                        "Where each stands now: pending and approved leave out those past "
                        "their expiry, which are expired.",
                    ),
                    _query_limit(100),
                    _query(
                        "before",
                        {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 400,
                            "pattern": "^[A-Za-z0-9_-]+$",
                        },
                        "The next page: the 'next' of the page before (newest first).",
                    ),
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
                parameters=[_approval_id()],
            )
        },
        "/v1/approvals/{approval_id}:grant": _approval_decision(
            "grantApproval",
            "Grant a pending approval (scope charter:approve, same tenant, not your own).",
        ),
        "/v1/approvals/{approval_id}:deny": _approval_decision(
            "denyApproval",
            "Deny a pending approval, or revoke a granted one that was not used yet.",
        ),
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
        "/v1/effects/{key}": {
            "get": _operation(
                "getEffect",
                "One effect of the outbox, by key, as the list shows it: approvers and admins "
                "see every effect of the tenant, other callers those their own calls staged; "
                "any other key is 404.",
                tag="operations",
                ok="Effect",
                problems=(401, 403, 404, 503),
                parameters=[_effect_key(), _query_tenant()],
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
            "get": _operation(
                "getOpenAPI",
                "This document, listing the tools the caller may call.",
                tag="operations",
                ok=None,
                ok_description="An OpenAPI 3.1 document.",
                problems=(401,),
                secured=False,
            )
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
