"""An MCP server (the official SDK's MCPServer, over stdio) whose write takes its time.

Each run appends a line to the file named by ``JOURNAL`` before it sleeps, so a test
counts how often the upstream ran a call whose answer charter stopped waiting for.
"""

from __future__ import annotations

import os
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("slow")


@server.tool()
def slow_write(seconds: float) -> str:
    """Write, then take ``seconds`` to say so."""
    with open(os.environ["JOURNAL"], "a", encoding="utf-8") as journal:
        journal.write("ran\n")
    time.sleep(seconds)
    return "written"


@server.tool()
async def busy_read(seconds: float) -> str:
    """Compute for ``seconds`` without yielding: the server answers nothing meanwhile."""
    time.sleep(seconds)
    return "computed"


if __name__ == "__main__":
    server.run("stdio")
