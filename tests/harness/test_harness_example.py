"""examples/harness_demo.py runs end to end: pause for confirmation and approval, resume."""

from __future__ import annotations

from tests.builders import run_example


def test_the_demo_pauses_twice_resumes_after_a_restart_and_cancels_once() -> None:
    lines = run_example("examples.harness_demo")
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
