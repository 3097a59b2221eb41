"""An MCP server (the official SDK's MCPServer, over stdio) whose tool list changes.

``unlock`` adds the tool ``secret`` and announces the change; the gateway tests use it to
watch charter follow an upstream's ``tools/list_changed``.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("changing")


def secret() -> str:
    """Tell the secret."""
    return "swordfish"


@server.tool()
async def unlock(ctx: Context) -> str:
    """Add the secret tool."""
    server.add_tool(secret)
    await ctx.notify_tools_changed()
    return "unlocked"


if __name__ == "__main__":
    server.run("stdio")
