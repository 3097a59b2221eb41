"""examples/harness_demo.py runs end to end: pause for confirmation and approval, resume."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_pauses_twice_resumes_after_a_restart_and_cancels_once() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples.harness_demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    statuses = [line for line in lines if not line.startswith(" ")]
    assert statuses == [
        "turn: paused",
        "user confirmed: paused",
        "approved, resumed after a restart: completed",
        "the same approval again: rejected (execution.invalid-input)",
        "bookings cancelled: ['bk_42']",
    ]
    assert "  waiting (confirmation)" in "\n".join(lines)
    assert "  c3 cancel_booking: completed {'booking_id': 'bk_42', 'refunded_eur': 380}" in lines
