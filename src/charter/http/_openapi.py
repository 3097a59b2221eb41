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

from charter._per_registration import PerRegistration
from charter.manifest import CONTRACT_VERSION, RegisteredTool
from charter.outcome import ReportsToolError
from charter.policy import CONTROL_FIELD, controls_schema
from charter.tool import JSON_SCHEMA_DIALECT, Tool

from ._openapi_components import (
    SCHEMAS,
    control_parameters,
    payload_schemas,
    problem_refs,
    problem_responses,
)
from ._openapi_paths import fixed_paths

__all__ = ("OpenAPIDocument",)

_DEFS = "#/$defs/"
_COMPONENT_NAME = re.compile(r"[^A-Za-z0-9._-]")

_CONTROL_PARAMETERS: Mapping[str, str] = {
    "requestId": "IdempotencyKey",
    "confirmed": "CharterConfirm",
    "approvalId": "CharterApproval",
}
"""The header parameter of each control, documented for the tools that accept it."""

_CALL_PROBLEMS = (400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503, 504)


def _call_problems(tool: Tool[Any, Any, Any]) -> list[int]:
    """The problem statuses a call may answer: 502 too when its output can report an error."""
    if issubclass(tool.output_model, ReportsToolError):
        return sorted((*_CALL_PROBLEMS, 502))
    return list(_CALL_PROBLEMS)


class OpenAPIDocument:
    """Builds the OpenAPI document for a caller from cached per-tool fragments."""

    def __init__(self, *, title: str = "charter", version: str = CONTRACT_VERSION) -> None:
        """Prepare the fixed part of the document once."""
        self.title = title
        self.version = version
        self._fixed_schemas = payload_schemas()
        self._fragments = PerRegistration(_ToolFragment)

    def build(self, tools: Iterable[RegisteredTool], *, server_url: str = "/") -> dict[str, Any]:
        """The document listing ``tools`` (the ones the caller may call) and every fixed route."""
        paths = fixed_paths()
        schemas = dict(self._fixed_schemas)
        used_ids: set[str] = set()
        for registered in tools:
            fragment = self._fragments.get(registered)
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
                {"name": "resources", "description": "Read resources and resource templates."},
                {"name": "prompts", "description": "Get prompts."},
                {"name": "approvals", "description": "Decide on risky actions."},
                {"name": "operations", "description": "Status, audit, health."},
            ],
            "paths": paths,
            "components": {
                "schemas": schemas,
                "responses": problem_responses(),
                "parameters": control_parameters(),
                "securitySchemes": {
                    "bearerAuth": {"type": "http", "scheme": "bearer"},
                    "apiKeyAuth": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                },
            },
        }


class _ToolFragment:
    """One tool's operation and the component schemas it refers to."""

    def __init__(self, registered: RegisteredTool) -> None:
        tool = registered.tool
        prefix = _COMPONENT_NAME.sub("_", registered.name)
        self.schemas: dict[str, Any] = {}
        request = self._component(f"{prefix}.Request", tool.input_schema)
        _add_controls(self.schemas[f"{prefix}.Request"], registered)
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
                        "application/json": {"schema": {"$ref": SCHEMAS + f"{prefix}.Result"}}
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
                    "content": {"application/json": {"schema": {"$ref": SCHEMAS + "Accepted"}}},
                },
                **problem_refs(_call_problems(tool)),
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
        return {"$ref": SCHEMAS + name}


def _add_controls(schema: dict[str, Any], registered: RegisteredTool) -> None:
    """Let the request body carry the ``_charter`` controls the tool accepts."""
    properties = schema.get("properties")
    controls = controls_schema(
        registered.controls,
        delegable=registered.tool.delegable,
        nullable=True,  # null means "not given", as the host reads it
        require=False,  # a required control may come from its header instead
        note="Each may also be sent as a header.",
    )
    if isinstance(properties, dict) and controls is not None:
        properties[CONTROL_FIELD] = controls


def _rewrite_refs(node: Any, root: str, names: Mapping[str, str]) -> Any:
    """Point ``#/$defs/X`` (and ``#``) references at their new components."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                if value == "#":
                    value = SCHEMAS + root
                elif value.startswith(_DEFS) and value[len(_DEFS) :] in names:
                    value = SCHEMAS + names[value[len(_DEFS) :]]
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
