"""A control header sent twice is refused: the first value must not hide the other.

``Idempotency-Key: a`` and ``Idempotency-Key: b`` used to run keyed on ``a`` (a retry with
``b`` alone ran the handler again), and ``Charter-Confirm: true`` beside
``Charter-Confirm: false`` counted as confirmed. Each is now 400 ``invalid_header``, like
one header holding two values, and nothing runs.
"""

from __future__ import annotations

import httpx
import pytest
from http_support import Live, assert_problem
from tests.builders import request_id as key

RENAME = "/v1/tools/trips.rename:call"
CANCEL = "/v1/tools/trips.cancel:call"


def test_two_idempotency_keys_are_400_and_nothing_runs(agent: httpx.Client, live: Live) -> None:
    first, second = key(), key()
    arguments = {"trip_id": "trp_twokeys", "name": "Two"}
    both = agent.post(
        RENAME, json=arguments, headers=[("Idempotency-Key", first), ("Idempotency-Key", second)]
    )
    assert_problem(
        both,
        400,
        code="INVALID_INPUT",
        reason="invalid_header",
        meta={"header": "Idempotency-Key"},
    )
    assert "more than once" in both.json()["detail"]
    assert live.lab.runs["rename:trp_twokeys"] == 0
    # Each key alone then runs once, and its retry is a replay.
    ran = agent.post(RENAME, json=arguments, headers={"Idempotency-Key": second})
    again = agent.post(RENAME, json=arguments, headers={"Idempotency-Key": second})
    assert (ran.status_code, again.json()["replayed"]) == (200, True)
    assert live.lab.runs["rename:trp_twokeys"] == 1


def test_the_same_key_twice_is_400_too(agent: httpx.Client, live: Live) -> None:
    same = key()
    response = agent.post(
        RENAME,
        json={"trip_id": "trp_samekey", "name": "Same"},
        headers=[("Idempotency-Key", same), ("Idempotency-Key", same)],
    )
    assert_problem(response, 400, reason="invalid_header", meta={"header": "Idempotency-Key"})
    assert live.lab.runs["rename:trp_samekey"] == 0


def test_confirm_true_and_false_is_400_not_a_confirmation(agent: httpx.Client, live: Live) -> None:
    response = agent.post(
        CANCEL,
        json={"trip_id": "trp_twoconf"},
        headers=[
            ("Idempotency-Key", key()),
            ("Charter-Confirm", "true"),
            ("Charter-Confirm", "false"),
        ],
    )
    assert_problem(response, 400, reason="invalid_header", meta={"header": "Charter-Confirm"})
    assert live.lab.runs["cancel:trp_twoconf"] == 0


@pytest.mark.parametrize("values", [("apr_one", "apr_two"), ("apr_one", "apr_one")])
def test_two_approval_headers_are_400(agent: httpx.Client, values: tuple[str, str]) -> None:
    response = agent.post(
        CANCEL,
        json={"trip_id": "trp_twoapr"},
        headers=[("Idempotency-Key", key()), *(("Charter-Approval", v) for v in values)],
    )
    assert_problem(response, 400, reason="invalid_header", meta={"header": "Charter-Approval"})
