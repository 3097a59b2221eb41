"""docs/reliability.md cites tests that exist, and a test for every row it owns."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reliability.md"
CITATION = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
ROWS = (
    [f"L{n:02d}" for n in range(1, 19)]
    + ["K01", "K02", "K05", "K07"]
    + [f"A{n:02d}" for n in range(1, 17)]
    + ["X01", "X03", "X04"]
)
"""The battery rows of reliability.md §5.1-5.3 this repository covers (issue #4), and the
transport rows of its own battery (X04: issue #14)."""


def cited() -> list[tuple[str, str]]:
    return CITATION.findall(PAGE.read_text(encoding="utf-8"))


def test_every_test_the_reliability_page_cites_exists() -> None:
    missing = []
    for path, name in cited():
        source = ROOT / path
        text = source.read_text(encoding="utf-8") if source.is_file() else ""
        if not re.search(rf"^(?:async )?def {name}\(", text, re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert missing == []


def test_every_battery_row_is_cited_with_a_test_named_for_it() -> None:
    names = {name for _, name in cited()}
    assert [row for row in ROWS if not any(n.startswith(f"test_{row}_") for n in names)] == []
