"""examples/harness_demo.py runs end to end: pause for confirmation and approval, resume."""

from __future__ import annotations

import pytest

from examples import harness_demo

pytestmark = pytest.mark.anyio


async def test_the_demo_pauses_twice_resumes_after_a_restart_and_cancels_once() -> None:
    results = await harness_demo.main()

    assert [r.status for r in results] == ["paused", "paused", "completed", "rejected"]
    assert [i.gate for r in results[:2] for i in r.interactions] == ["confirmation", "approval"]
    assert results[2].results[0].output == {"booking_id": "bk_42", "refunded_eur": 380}
    assert harness_demo.CANCELLED == ["bk_42"]
