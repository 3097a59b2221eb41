"""charter's HTTP transport: REST under ``/v1``, the approvals console, and MCP at ``/mcp``.

Needs the ``http`` extra: ``pip install 'charter[http]'``.
"""

from __future__ import annotations

try:
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "charter.http needs Starlette and uvicorn: pip install 'charter[http]'"
    ) from exc

from .app import DEFAULT_BODY_TIMEOUT as DEFAULT_BODY_TIMEOUT
from .app import McpMount as McpMount
from .app import create_app as create_app

__all__ = ("DEFAULT_BODY_TIMEOUT", "McpMount", "create_app")
