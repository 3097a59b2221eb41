"""docs/http.md stays true: its code runs, its status tables are the code's tables."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from charter import ErrorCode
from charter.http._problem import STATUS_BY_CODE, STATUS_BY_REASON

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = (DOCS / "http.md").read_text(encoding="utf-8")
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


@pytest.mark.anyio
async def test_the_example_app_serves_its_tool() -> None:
    module = types.ModuleType("docs_http")
    sys.modules[module.__name__] = module
    try:
        for block in PYTHON_BLOCK.findall(PAGE):
            exec(compile(block, "docs/http.md", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    app = module.__dict__["app"]
    assert isinstance(app, Starlette)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post(
            "/v1/tools/notes.search:call",
            json={"text": "hi"},
            headers={"X-API-Key": "secret-key"},
        )
    assert response.json() == {"output": {"matches": ["hi"]}, "replayed": False}


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
