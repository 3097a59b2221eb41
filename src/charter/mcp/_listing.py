"""Registered tools as MCP ``tools/list`` entries: schemas passed through, contract in ``_meta``."""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError

from .._mcp_config import STATUS_TOOL
from .._per_registration import PerRegistration
from ..ledger import ActionStatus
from ..manifest import RegisteredTool
from ..policy import CONTROL_FIELD, controls_schema
from ..tool import JSON_SCHEMA_DIALECT
from ._forwarded import forwarded_output_schema, is_forwarded

__all__ = ("TOOL_META_KEY", "ToolListing", "refuse_cursor", "status_tool")

TOOL_META_KEY = "charter/tool"
"""``_meta`` key of a listed tool: charter's contract data for it."""

# Manifest keys that MCP carries in its own fields, not in ``_meta``.
_MCP_FIELDS = frozenset({"name", "description", "inputSchema", "outputSchema", "annotations"})


def refuse_cursor(params: types.PaginatedRequestParams | None) -> None:
    """Refuse a ``cursor`` on a ``*/list`` request: charter lists everything on one page.

    No answer of charter's carries a ``nextCursor``, so any cursor is one it never gave
    out, and the spec asks for ``-32602`` for an invalid cursor (rather than the first
    page again, which a client that pages would take for the next one).

    Raises:
        MCPError: ``INVALID_PARAMS`` when the request names a cursor.
    """
    if params is not None and params.cursor is not None:
        raise MCPError(
            code=types.INVALID_PARAMS,
            message="Invalid params: unknown cursor (this server lists everything on one "
            "page and gives out no cursors)",
        )


class ToolListing:
    """Builds (once per registered tool) the ``types.Tool`` a caller sees in ``tools/list``."""

    def __init__(self) -> None:
        self._listed = PerRegistration(_listed)

    def tool(self, registered: RegisteredTool) -> types.Tool:
        """The MCP tool for ``registered``; cached while the registration is the same object."""
        return self._listed.get(registered)


def _listed(registered: RegisteredTool) -> types.Tool:
    entry = registered.entry
    annotations = entry.get("annotations") or {}
    contract = {k: v for k, v in entry.items() if k not in _MCP_FIELDS}
    policy = entry.get("actionPolicy")
    if isinstance(policy, dict) and "targetResolution" in policy:
        contract["targetResolution"] = policy["targetResolution"]
    return types.Tool(
        name=registered.name,
        title=annotations.get("title"),
        description=registered.tool.description,
        input_schema=_input_schema(registered),
        output_schema=(
            forwarded_output_schema(registered.tool)
            if is_forwarded(registered.tool)
            else registered.tool.output_schema
        ),
        annotations=types.ToolAnnotations.model_validate(annotations) if annotations else None,
        meta={TOOL_META_KEY: contract},
    )


def _input_schema(registered: RegisteredTool) -> dict[str, Any]:
    """The tool's schema unchanged, plus the optional ``_charter`` controls it accepts."""
    schema = registered.tool.input_schema
    controls = controls_schema(registered.controls, delegable=registered.tool.delegable)
    if controls is None:
        return schema
    properties = schema.get("properties")
    return {
        **schema,
        "properties": {
            **(properties if isinstance(properties, dict) else {}),
            CONTROL_FIELD: controls,
        },
    }


def status_tool() -> types.Tool:
    """The adapter's ``charter.action_status`` tool (listed for authenticated callers)."""
    output = ActionStatus.model_json_schema(mode="serialization")
    return types.Tool(
        name=STATUS_TOOL,
        title="Action status",
        description="Where a request you made stands: completed (with its result), "
        "deferred, awaiting approval, approved, denied (by a person, with why) or expired. "
        f"Pass the requestId you sent in {CONTROL_FIELD}.",
        input_schema={
            "$schema": JSON_SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "requestId": {
                    "type": "string",
                    "format": "uuid",
                    "description": "The requestId of the call to look up.",
                },
                "tenant": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 200,
                    "description": "The tenant a delegated call acted for (default: yours).",
                },
            },
            "required": ["requestId"],
            "additionalProperties": False,
        },
        output_schema={"$schema": JSON_SCHEMA_DIALECT, **output},
        annotations=types.ToolAnnotations(
            title="Action status",
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
