"""docs/http.md stays true: its status tables are the code's tables (tests/test_docs.py
runs its code, which asserts its own answers)."""

from __future__ import annotations

import re
from pathlib import Path

from charter import ErrorCode
from charter.http._problem import STATUS_BY_CODE, STATUS_BY_REASON

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = (DOCS / "http.md").read_text(encoding="utf-8")


def test_the_documented_status_of_every_code_is_the_one_served() -> None:
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| (\d{3}) \|", PAGE, re.MULTILINE))
    assert rows == {code.value: str(STATUS_BY_CODE[code][0]) for code in ErrorCode}


def test_the_documented_reasons_are_the_ones_that_change_the_status() -> None:
    documented: dict[str, int] = {}
    for reasons, status in re.findall(
        r"^\| (`[a-z0-9_]+`(?:, `[a-z0-9_]+`)*) \| (\d{3}) \|", PAGE, re.M
    ):
        for reason in re.findall(r"`([a-z0-9_]+)`", reasons):
            documented[reason] = int(status)
    assert documented == {reason: status for reason, (status, _) in STATUS_BY_REASON.items()}
