"""MCP over stdio, as one configured principal."""

from __future__ import annotations

from collections.abc import Mapping

from mcp.server.stdio import stdio_server

from .. import __version__
from ..auth import Principal
from ..host import Host
from ._render import Presenter
from .server import create_server

__all__ = ("serve_stdio",)


async def serve_stdio(
    host: Host,
    principal: Principal | None,
    *,
    name: str = "charter",
    version: str = __version__,
    presenters: Mapping[str, Presenter] | None = None,
) -> None:
    """Serve ``host``'s tools on stdin/stdout until the client closes the pipe.

    stdio carries no credentials, so every call runs as ``principal``: the identity the
    operator who launched the process configured (scopes, tenant and all). Pass None to
    expose only public tools; there is no "anything goes" mode.

    Args:
        host: the host whose pipeline runs every call.
        principal: who every call runs as, or None for anonymous (public tools only).
        name: the server name announced to clients.
        version: the server version announced to clients.
        presenters: per-tool renderers of output as MCP content (see ``create_server``).
    """
    server = create_server(
        host, name=name, version=version, principal=principal, presenters=presenters
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
