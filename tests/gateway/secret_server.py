"""An MCP server (the official SDK's MCPServer, over stdio) whose tool takes a password.

The SDK writes a ``SecretStr`` parameter into the tool's input schema as ``"format":
"password", "writeOnly": true``; the gateway tests use it to check that charter binds such
an argument into the approval but never shows it.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from pydantic import SecretStr

server = MCPServer("vault")


@server.tool()
def sign_in(user: str, password: SecretStr) -> str:
    """Sign a user in."""
    return f"{user} signed in with a {len(password.get_secret_value())}-character password"


if __name__ == "__main__":
    server.run("stdio")
