from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_handler_annotations_give_the_tool_its_types_under_mypy_strict() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "tests/typing"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout
