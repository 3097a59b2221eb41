"""The OpenAPI 3.1 document: the fixed routes plus one operation per tool the caller may call.

Each tool's operation carries the tool's own JSON Schemas, unchanged except that their
``$defs`` move to ``components/schemas`` (prefixed with the tool's name, references
rewritten) and the request schema gains the optional ``_charter`` controls the tool
accepts. Tool fragments are built once per registered tool; a request only assembles them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from charter.manifest import CONTRACT_VERSION, RegisteredTool
from charter.policy import CONTROL_FIELD
from charter.tool import JSON_SCHEMA_DIALECT

from ._payloads import (
    AcceptedBody,
    ActionStatusBody,
    ApprovalBody,
    ApprovalListBody,
    AuditBody,
    CallResultBody,
    DecisionBody,
    HealthBody,
    ProblemBody,
    ToolListBody,
    WhoamiBody,
)
from ._problem import PROBLEM_MEDIA_TYPE

__all__ = ("OpenAPIDocument",)

_SCHEMAS = "#/components/schemas/"
_DEFS = "#/$defs/"
_COMPONENT_NAME = re.compile(r"[^A-Za-z0-9._-]")

_PROBLEM_STATUSES: Mapping[int, str] = {
    400: "Malformed request: the body is not strict JSON, a header is malformed, or a "
    "control was sent twice with different values.",
    401: "Missing or invalid credentials.",
    403: "Not allowed: missing scopes, another tenant, an approval that does not match, "
    "or a denial.",
    404: "Unknown, or not visible to the caller.",
    409: "The same request is still running; retry with the same Idempotency-Key.",
    413: "The body, or a string or number in it, is too large.",
    422: "Invalid input, or a request id reused for a different call.",
    500: "The server failed; the problem carries only an error id.",
    503: "Unavailable: cancelled, a missing service, or a dependency that is down.",
    504: "The tool timed out; retry with the same Idempotency-Key.",
}

_CONTROL_PARAMETERS: Mapping[str, str] = {
    "requestId": "IdempotencyKey",
    "confirmed": "CharterConfirm",
    "approvalId": "CharterApproval",
}
"""The header parameter of each control, documented for the tools that accept it."""

_CALL_PROBLEMS = (400, 401, 403, 404, 409, 413, 422, 500, 503, 504)

_ID = {"type": ["string", "null"], "minLength": 1, "maxLength": 200, "pattern": r"\S"}

# null means "not given", as the host reads it.
_CONTROL_SCHEMAS: Mapping[str, dict[str, Any]] = {
    "requestId": {
        "type": ["string", "null"],
        "format": "uuid",
        "description": "A UUID generated once per action and reused on retries "
        "(or send the Idempotency-Key header).",
    },
    "confirmed": {
        # Any JSON value is accepted; only the boolean true confirms (the host's rule).
        "description": "true once the user confirmed (or send Charter-Confirm: true); "
        "any other value leaves the call unconfirmed.",
        "examples": [True],
    },
    "approvalId": {
        **_ID,
        "description": "The granted approval (or send the Charter-Approval header).",
    },
    "reasonCode": {**_ID, "description": "Why the action is taken."},
    "onBehalfOf": {
        **_ID,
        "description": "The tenant a delegable tool acts for (admin scope only).",
    },
}


class OpenAPIDocument:
    """Builds the OpenAPI document for a caller from cached per-tool fragments."""

    def __init__(self, *, title: str = "charter", version: str = CONTRACT_VERSION) -> None:
        """Prepare the fixed part of the document once."""
        self.title = title
        self.version = version
        self._fixed_schemas = _payload_schemas()
        self._tools: dict[str, tuple[RegisteredTool, _ToolFragment]] = {}

    def build(self, tools: Iterable[RegisteredTool], *, server_url: str = "/") -> dict[str, Any]:
        """The document listing ``tools`` (the ones the caller may call) and every fixed route."""
        paths = _fixed_paths()
        schemas = dict(self._fixed_schemas)
        used_ids: set[str] = set()
        for registered in tools:
            fragment = self._fragment(registered)
            operation = dict(fragment.operation)
            operation["operationId"] = _unique(fragment.operation_id, used_ids)
            paths[f"/v1/tools/{registered.name}:call"] = {"post": operation}
            schemas.update(fragment.schemas)
        return {
            "openapi": "3.1.0",
            "jsonSchemaDialect": JSON_SCHEMA_DIALECT,
            "info": {
                "title": self.title,
                "version": self.version,
                "description": "Tools served by charter over HTTP. Errors are RFC 9457 "
                "problems (application/problem+json) with code, reason, next_steps and "
                "retryable. MCP clients connect to /mcp instead.",
            },
            "servers": [{"url": server_url}],
            "security": [{}, {"bearerAuth": []}, {"apiKeyAuth": []}],
            "tags": [
                {"name": "tools", "description": "Discover and call tools."},
                {"name": "approvals", "description": "Decide on risky actions."},
                {"name": "operations", "description": "Status, audit, health."},
            ],
            "paths": paths,
            "components": {
                "schemas": schemas,
                "responses": _problem_responses(),
                "parameters": _control_parameters(),
                "securitySchemes": {
                    "bearerAuth": {"type": "http", "scheme": "bearer"},
                    "apiKeyAuth": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                },
            },
        }

    def _fragment(self, registered: RegisteredTool) -> _ToolFragment:
        cached = self._tools.get(registered.name)
        if cached is not None and cached[0] is registered:
            return cached[1]
        fragment = _ToolFragment(registered)
        self._tools[registered.name] = (registered, fragment)
        return fragment


class _ToolFragment:
    """One tool's operation and the component schemas it refers to."""

    def __init__(self, registered: RegisteredTool) -> None:
        tool = registered.tool
        prefix = _COMPONENT_NAME.sub("_", registered.name)
        self.schemas: dict[str, Any] = {}
        request = self._component(f"{prefix}.Request", tool.input_schema)
        _add_controls(
            self.schemas[f"{prefix}.Request"],
            [*registered.controls.accepted, *(["onBehalfOf"] if tool.delegable else [])],
        )
        output = self._component(f"{prefix}.Output", tool.output_schema)
        self.schemas[f"{prefix}.Result"] = {
            "type": "object",
            "properties": {"output": output, "replayed": {"type": "boolean"}},
            "required": ["output", "replayed"],
            "additionalProperties": False,
        }
        self.operation_id = "call_" + re.sub(r"[^A-Za-z0-9_]", "_", registered.name)
        required = tool.input_schema.get("required")
        entry = registered.entry
        self.operation: dict[str, Any] = {
            "tags": ["tools"],
            "summary": tool.description.strip().splitlines()[0][:120] if tool.description else "",
            "description": _call_description(registered),
            "parameters": [
                {"$ref": f"#/components/parameters/{parameter}"}
                for control, parameter in _CONTROL_PARAMETERS.items()
                if control in registered.controls.accepted
            ],
            "requestBody": {
                "required": bool(required),
                "content": {"application/json": {"schema": request}},
            },
            "responses": {
                "200": {
                    "description": "Completed: the tool's validated output.",
                    "headers": {
                        "Idempotent-Replayed": {
                            "description": "true when this is the stored result of an "
                            "earlier identical request.",
                            "schema": {"type": "string", "enum": ["true"]},
                        }
                    },
                    "content": {
                        "application/json": {"schema": {"$ref": _SCHEMAS + f"{prefix}.Result"}}
                    },
                },
                "202": {
                    "description": "Waiting for a person (interaction-required: confirm, or "
                    "an approver grants the approvalId), or continuing elsewhere (deferred).",
                    "headers": {
                        "Location": {
                            "description": "Where the request stands: /v1/actions/{requestId}.",
                            "schema": {"type": "string"},
                        }
                    },
                    "content": {"application/json": {"schema": {"$ref": _SCHEMAS + "Accepted"}}},
                },
                **_problem_refs(_CALL_PROBLEMS),
            },
            "x-charter": {
                key: entry[key]
                for key in (
                    "capabilityId",
                    "capabilityVersion",
                    "tier",
                    "deploymentRisk",
                    "requiredScopes",
                    "riskPolicy",
                    "actionPolicy",
                    "controls",
                    "auth",
                )
                if key in entry
            },
        }
        if tool.deprecation is not None:
            self.operation["deprecated"] = True

    def _component(self, name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
        """Store ``schema`` as component ``name`` with its ``$defs`` beside it; return a ref."""
        body = copy.deepcopy(dict(schema))
        body.pop("$schema", None)
        defs: dict[str, Any] = body.pop("$defs", None) or {}
        names = {key: f"{name}.{_COMPONENT_NAME.sub('_', key)}" for key in defs}
        self.schemas[name] = _rewrite_refs(body, name, names)
        for key, value in defs.items():
            self.schemas[names[key]] = _rewrite_refs(value, name, names)
        return {"$ref": _SCHEMAS + name}


def _add_controls(schema: dict[str, Any], accepted: Iterable[str]) -> None:
    """Let the request body carry the ``_charter`` controls the tool accepts.

    TODO(issue 6): charter.mcp builds the same object for tools/list; one helper in the
    core (beside ``ControlSpec``) should serve both transports.
    """
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    names = sorted(accepted)
    properties[CONTROL_FIELD] = {
        "type": "object",
        "description": "Invocation controls; each may also be sent as a header.",
        "properties": {n: _CONTROL_SCHEMAS[n] for n in names if n in _CONTROL_SCHEMAS},
        "additionalProperties": False,
    }


def _rewrite_refs(node: Any, root: str, names: Mapping[str, str]) -> Any:
    """Point ``#/$defs/X`` (and ``#``) references at their new components."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                if value == "#":
                    value = _SCHEMAS + root
                elif value.startswith(_DEFS) and value[len(_DEFS) :] in names:
                    value = _SCHEMAS + names[value[len(_DEFS) :]]
            out[key] = _rewrite_refs(value, root, names)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(item, root, names) for item in node]
    return node


def _call_description(registered: RegisteredTool) -> str:
    tool = registered.tool
    controls = registered.controls
    lines = [tool.description.strip(), ""]
    lines.append(
        f"Tier `{tool.tier.value}`, risk `{registered.evaluated_risk}`, auth `{tool.auth}`"
        + (
            f", scopes {', '.join(f'`{s}`' for s in registered.required_scopes)}."
            if registered.required_scopes
            else "."
        )
    )
    if "requestId" in controls.required:
        lines.append(
            "Needs a request id: send `Idempotency-Key: <uuid>` (or `_charter.requestId`); "
            "repeating it replays the stored result."
        )
    if "confirmed" in controls.required:
        lines.append("Needs confirmation: send `Charter-Confirm: true` once the user agrees.")
    if "approvalId" in controls.accepted:
        lines.append(
            "Needs an approval: the first call answers 202 with an `approvalId`; once an "
            "approver grants it, retry with `Charter-Approval: <approvalId>` and the same "
            "Idempotency-Key."
        )
    return "\n".join(lines)


def _unique(operation_id: str, used: set[str]) -> str:
    candidate, n = operation_id, 2
    while candidate in used:
        candidate, n = f"{operation_id}_{n}", n + 1
    used.add(candidate)
    return candidate


# -- the fixed part ---------------------------------------------------------------------------


def _payload_schemas() -> dict[str, Any]:
    """Component schemas of the transport's own payloads, named without the ``Body`` suffix."""
    responses: list[type[BaseModel]] = [
        AcceptedBody,
        ActionStatusBody,
        ApprovalBody,
        ApprovalListBody,
        AuditBody,
        CallResultBody,
        HealthBody,
        ProblemBody,
        ToolListBody,
        WhoamiBody,
    ]
    _, top = models_json_schema(
        [(model, "serialization") for model in responses] + [(DecisionBody, "validation")],
        by_alias=True,
        ref_template=_SCHEMAS + "{model}",
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
            if key == "$ref" and isinstance(value, str) and value.startswith(_SCHEMAS):
                name = value[len(_SCHEMAS) :]
                value = _SCHEMAS + renamed.get(name, name)
            out[key] = _rename_refs(value, renamed)
        return out
    if isinstance(node, list):
        return [_rename_refs(item, renamed) for item in node]
    return node


def _problem_responses() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, description in _PROBLEM_STATUSES.items():
        response: dict[str, Any] = {
            "description": description,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": _SCHEMAS + "Problem"}}},
        }
        headers: dict[str, Any] = {}
        if status in (401, 403):
            headers["WWW-Authenticate"] = {
                "description": "The Bearer challenge (insufficient_scope names the missing "
                "scopes).",
                "schema": {"type": "string"},
            }
        if status in (409, 503):
            headers["Retry-After"] = {
                "description": "Seconds to wait before retrying, when retryable.",
                "schema": {"type": "string"},
            }
        if headers:
            response["headers"] = headers
        out[f"Problem{status}"] = response
    return out


def _problem_refs(statuses: Iterable[int]) -> dict[str, Any]:
    return {str(s): {"$ref": f"#/components/responses/Problem{s}"} for s in statuses}


def _control_parameters() -> dict[str, Any]:
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
    return {"application/json": {"schema": {"$ref": _SCHEMAS + name}}}


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "minLength": 1},
    }


def _query_limit(default: int) -> dict[str, Any]:
    return {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": default},
    }


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
    """One fixed operation; ``secured`` None means public, False means credentials optional."""
    operation: dict[str, Any] = {
        "tags": [tag],
        "operationId": operation_id,
        "summary": summary,
        "responses": {
            "200": {"description": "OK", "content": _json_content(ok)},
            **_problem_refs(problems),
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


def _fixed_paths() -> dict[str, Any]:
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
                    **_problem_refs((401, 404)),
                },
            }
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
                    {
                        "name": "status",
                        "in": "query",
                        "required": False,
                        "schema": {
                            "type": "string",
                            "enum": ["pending", "approved", "denied", "consumed", "all"],
                            "default": "pending",
                        },
                    },
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
                    {
                        "name": "tenant",
                        "in": "query",
                        "required": False,
                        "description": "Another tenant (admin scope only).",
                        "schema": {"type": "string"},
                    },
                    _query_limit(50),
                ],
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
                    **_problem_refs((401,)),
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
                "The store answers.",
                tag="operations",
                ok="Health",
                problems=(503,),
                secured=None,
            )
        },
    }
