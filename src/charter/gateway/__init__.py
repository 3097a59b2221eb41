"""The gateway: upstream MCP servers' tools served under charter's policy.

``load_config("upstreams.toml")`` (or ``UpstreamConfig`` objects in Python) says which
servers to reach and how to govern their tools; ``async with Gateway(config, registry)``
connects to them through the official MCP client and registers each tool as
``<namespace>.<tool>``. From then on every call goes through the host like any other:
scopes, tenancy, confirmation, approvals bound to the exact arguments, the exactly-once
ledger and audit. ``charter serve --upstreams upstreams.toml`` does all of it.
"""

from __future__ import annotations

try:
    import mcp.client  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("charter.gateway needs the MCP SDK: pip install 'charter[mcp]'") from exc

from ._config import GatewayConfig, ToolPolicy, UpstreamConfig, load_config, parse_config
from ._gateway import Gateway
from ._upstream import Backoff, UpstreamHealth, UpstreamState

__all__ = (
    "Backoff",
    "Gateway",
    "GatewayConfig",
    "ToolPolicy",
    "UpstreamConfig",
    "UpstreamHealth",
    "UpstreamState",
    "load_config",
    "parse_config",
)
