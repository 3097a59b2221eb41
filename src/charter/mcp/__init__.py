"""charter's MCP transport, on the official SDK's low-level server.

``create_server(host)`` builds the server; ``serve_stdio(host, principal)`` runs it on
stdio; ``streamable_http_app(host)`` serves it over streamable HTTP (serve its ``app``
at ``/mcp`` and enter its ``run()`` in the lifespan), and ``create_asgi_app(host)`` is a
standalone Starlette app around that.
"""

from __future__ import annotations

try:
    import mcp.server.lowlevel  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("charter.mcp needs the MCP SDK: pip install 'charter[mcp]'") from exc

from .._mcp_config import STATUS_TOOL, SessionLimits
from ._events import MemoryEventStore, Resumability, SessionEventStore
from ._forwarded import ForwardedResult
from ._interact import ConnectionState
from ._listing import TOOL_META_KEY
from ._render import OUTCOME_META_KEY, RESOLUTION, Presenter, Resolution
from ._stored_events import SqlEventStore
from .http import DEFAULT_ALLOWED_HOSTS, StreamableHTTPApp, create_asgi_app, streamable_http_app
from .server import create_server
from .stdio import serve_stdio

__all__ = (
    "DEFAULT_ALLOWED_HOSTS",
    "OUTCOME_META_KEY",
    "RESOLUTION",
    "STATUS_TOOL",
    "TOOL_META_KEY",
    "ConnectionState",
    "ForwardedResult",
    "MemoryEventStore",
    "Presenter",
    "Resolution",
    "Resumability",
    "SessionEventStore",
    "SessionLimits",
    "SqlEventStore",
    "StreamableHTTPApp",
    "create_asgi_app",
    "create_server",
    "serve_stdio",
    "streamable_http_app",
)
