"""docs/mcp.md: its code runs as written, and its config snippets are valid JSON."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import mcp.types as mcp_types
from mcp.client import Client
from tests import doc_blocks

PAGE = Path(__file__).parents[2] / "docs" / "mcp.md"
JSON_BLOCK = re.compile(r"^```json\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_code_on_the_page_runs_and_serves_what_it_says() -> None:
    server = doc_blocks.run_python(PAGE)["server"]

    async def anonymous_view() -> tuple[list[str], mcp_types.CallToolResult]:
        async with Client(server) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, await client.call_tool("chart", {"name": "x"})

    names, result = asyncio.run(anonymous_view())
    # Anonymous: the public chart tool only, not greet (it needs a principal).
    assert names == ["chart"]
    assert isinstance(result.content[0], mcp_types.ImageContent)


def test_the_config_snippets_are_json() -> None:
    blocks = JSON_BLOCK.findall(PAGE.read_text("utf-8"))
    assert len(blocks) == 2
    for block in blocks:
        assert "mcpServers" in json.loads(block)
