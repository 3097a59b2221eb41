"""docs/mcp.md: its code runs as written, and its config snippets are valid JSON."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import mcp.types as mcp_types
import pytest
from mcp.client import Client

PAGE = Path(__file__).parents[2] / "docs" / "mcp.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
JSON_BLOCK = re.compile(r"^```json\n(.*?)^```$", re.DOTALL | re.MULTILINE)


@pytest.mark.anyio
async def test_the_code_on_the_page_runs_and_serves_what_it_says() -> None:
    module = types.ModuleType("docs_mcp")
    sys.modules[module.__name__] = module
    try:
        for number, block in enumerate(PYTHON_BLOCK.findall(PAGE.read_text("utf-8")), 1):
            exec(compile(block, f"docs/mcp.md python block {number}", "exec"), module.__dict__)
        async with Client(module.server) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("chart", {"name": "x"})
    finally:
        del sys.modules[module.__name__]
    # Anonymous: the public chart tool only, not greet (it needs a principal).
    assert names == ["chart"]
    assert isinstance(result.content[0], mcp_types.ImageContent)


def test_the_config_snippets_are_json() -> None:
    blocks = JSON_BLOCK.findall(PAGE.read_text("utf-8"))
    assert len(blocks) == 2
    for block in blocks:
        assert "mcpServers" in json.loads(block)
