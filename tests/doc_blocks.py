"""The code blocks of README.md and docs/*.md, as the docs tests run them.

Every ```python``` / ```py``` block and every shell block (```bash```, ```sh```,
```shell```, ```console```) runs, unless the line right before its fence is a marker
saying why it cannot run as written::

    <!-- not-run: needs an OpenAI key -->

A marker without a reason is refused, as is one that precedes no runnable block.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PYTHON = frozenset({"python", "py"})
SHELL = frozenset({"bash", "sh", "shell", "console"})
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```$", re.DOTALL | re.MULTILINE)
MARKER = re.compile(r"^ {0,3}<!--\s*not-run:(.*?)-->$", re.MULTILINE)
"""A marker line; four spaces in are an indented code block (the marker shown, not used)."""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its code, and why it is skipped."""

    page: str
    line: int
    language: str
    code: str
    not_run: str | None
    """The marker's reason, or None for a block that must run."""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md, then every page of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(page: Path, root: Path = ROOT) -> list[Block]:
    """The page's Python and shell blocks, in order (named relative to ``root``).

    Raises:
        ValueError: A not-run marker has no reason, or no runnable block follows it.
    """
    text = page.read_text(encoding="utf-8")
    name = str(page.relative_to(root))
    found: list[Block] = []
    used: set[int] = set()
    for fence in FENCE.finditer(text):
        _indent, language, code = fence.groups()
        if language not in PYTHON | SHELL:
            continue
        before = text[: fence.start()].rstrip("\n")
        marker = MARKER.fullmatch(before.rsplit("\n", 1)[-1])
        reason = None
        if marker is not None:
            reason = marker.group(1).strip()
            if not reason:
                raise ValueError(f"{name}: a not-run marker must say why")
            used.add(before.count("\n") + 1)
        line = text.count("\n", 0, fence.start()) + 1
        found.append(Block(name, line, language, textwrap.dedent(code), reason))
    for marker in MARKER.finditer(text):
        line = text.count("\n", 0, marker.start()) + 1
        if line not in used:
            raise ValueError(f"{name}:{line}: a not-run marker before no Python or shell block")
    return found


def runnable(page: Path, languages: frozenset[str], root: Path = ROOT) -> list[Block]:
    """The page's blocks in ``languages`` that must run."""
    return [b for b in blocks(page, root) if b.language in languages and b.not_run is None]


def run_python(page: Path) -> dict[str, Any]:
    """Run the page's Python blocks in order, in one module; its namespace afterwards.

    Later blocks use what earlier ones defined; a block with a top-level ``await`` runs on
    the page's one event loop. The module is a real one while it runs, so dataclasses and
    postponed annotations resolve as in user code.
    """
    module = types.ModuleType(f"docs_{page.stem}")
    sys.modules[module.__name__] = module
    try:
        with asyncio.Runner() as runner:
            for block in runnable(page, PYTHON):
                code = compile(
                    block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
                )
                if code.co_flags & inspect.CO_COROUTINE:
                    runner.run(eval(code, module.__dict__))
                else:
                    exec(code, module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module.__dict__
