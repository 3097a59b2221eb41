"""The code in docs/host.md runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "host.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_code_in_the_host_page_runs() -> None:
    blocks = PYTHON_BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 3
    # In a fresh interpreter: the page installs OpenTelemetry's global providers, which
    # can be set once per process (this test session installs its own).
    script = "\n\n".join(blocks)
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_every_test_the_auth_page_cites_for_the_host_exists() -> None:
    auth = (PAGE.parent / "auth.md").read_text(encoding="utf-8")
    section = auth.split("## Where the host enforces this", 1)[1]
    cited = set(re.findall(r"`(test_\w+)`", section))
    assert len(cited) > 30
    sources = "\n".join(
        path.read_text(encoding="utf-8") for path in Path(__file__).parent.glob("test_*.py")
    )
    defined = set(re.findall(r"^(?:async )?def (test_\w+)", sources, re.MULTILINE))
    assert sorted(cited - defined) == []
