"""`charter serve` freezes its startup heap once it serves, with the MCP stack already in it.

A real `charter serve` subprocess; a `sitecustomize` on its path reports each `gc.freeze`
to its log, since nothing outside the process can see its collector.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from cli_support import create_key, sqlite
from tests.builders import MCP_HEADERS, MCP_INITIALIZE

from live_server import charter_serve

pytestmark = pytest.mark.slow

TARGET = (Path(__file__).parent / "notes_tools.py").read_text(encoding="utf-8")

REPORT_FREEZES = """
import gc, sys

_freeze = gc.freeze


def _reported_freeze():
    _freeze()
    print(
        f"gc.freeze: {gc.get_freeze_count()} objects, "
        f"charter.mcp imported: {'charter.mcp' in sys.modules}",
        file=sys.stderr,
        flush=True,
    )


gc.freeze = _reported_freeze
"""


def freezes_in(log: Path, *, within: float = 30) -> list[str]:
    """The freeze reports in ``log``, waiting until there is one."""
    deadline = time.monotonic() + within
    while True:
        reports = [line for line in log.read_text().splitlines() if line.startswith("gc.freeze")]
        if reports or time.monotonic() > deadline:
            return reports
        time.sleep(0.05)


def test_serve_freezes_its_startup_heap_once_with_mcp_imported_and_still_serves_mcp(
    write_target: Callable[[str], str], tmp_path: Path
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(REPORT_FREEZES, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(hooks), os.environ.get("PYTHONPATH")) if p)
    db = sqlite(tmp_path / "heap.db")
    key = create_key(db, "acme", "ann", "notes:read", "notes:write")
    target = f"{write_target(TARGET)}:registry"
    with (
        charter_serve(target, "--db", db, cwd=tmp_path, env={"PYTHONPATH": path}) as served,
        httpx.Client(timeout=30) as http,
    ):
        reports = freezes_in(served.log)
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}"}
        opened = http.post(served.url + "/mcp", json=MCP_INITIALIZE, headers=headers)
        listed = http.post(
            served.url + "/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]},
        )
    assert len(reports) == 1, reports
    count = int(reports[0].split()[1])
    assert count > 10_000, reports  # the modules, the app and the host: the startup heap
    assert reports[0].endswith("charter.mcp imported: True")
    assert opened.status_code == 200
    assert listed.status_code == 200 and '"notes.echo"' in listed.text
