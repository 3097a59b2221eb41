"""The code in docs/harness.md runs as written."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "harness.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_code_in_the_harness_page_runs() -> None:
    blocks = PYTHON_BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    assert blocks
    module = types.ModuleType("docs_harness")
    sys.modules[module.__name__] = module
    try:
        for number, block in enumerate(blocks, start=1):
            exec(compile(block, f"docs/harness.md python block {number}", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
