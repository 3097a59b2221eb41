"""``charter._redaction``: the one rule for what of a failure a caller may read."""

from __future__ import annotations

import logging

import pytest

from charter._redaction import SERVER_FAULT_CODES, redact
from charter.errors import DEFAULT_NEXT_STEPS, ErrorCode
from charter.outcome import Failed

SECRET = "postgresql://app:hunter2@db/prod"


def test_the_server_fault_codes_are_provider_error_and_invalid_output() -> None:
    assert SERVER_FAULT_CODES == {ErrorCode.PROVIDER_ERROR, ErrorCode.INVALID_OUTPUT}


@pytest.mark.parametrize("code", sorted(SERVER_FAULT_CODES))
def test_a_server_fault_keeps_only_its_code_retryability_and_a_logged_error_id(
    code: ErrorCode, caplog: pytest.LogCaptureFixture
) -> None:
    raised = Failed(
        code=code,
        message=f"cannot connect to {SECRET}",
        retryable=True,
        next_steps=(f"Check {SECRET}.",),
        meta={"reason": "db", "dsn": SECRET},
    )
    with caplog.at_level(logging.ERROR, logger="charter"):
        shown = redact(raised)
    error_id = str((shown.meta or {})["errorId"])
    assert shown == Failed(
        code=code,
        message=shown.message,
        retryable=True,
        next_steps=DEFAULT_NEXT_STEPS[code],
        meta={"errorId": error_id},
    )
    assert shown.message.endswith(f"Error id: {error_id}.")
    assert SECRET not in shown.model_dump_json()
    [record] = caplog.records
    assert error_id in record.getMessage() and SECRET in record.getMessage()


def test_a_failure_charter_already_logged_keeps_its_error_id_and_is_not_logged_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logged = Failed(
        code=ErrorCode.PROVIDER_ERROR,
        message="Tool 'x' failed. Error id: err_0123456789abcdef.",
        meta={"reason": "unhandled_exception", "errorId": "err_0123456789abcdef"},
    )
    with caplog.at_level(logging.ERROR, logger="charter"):
        shown = redact(logged)
        again = redact(shown)
    assert (shown.meta or {})["errorId"] == "err_0123456789abcdef"
    assert again == shown
    assert caplog.records == []


def test_an_error_id_that_is_not_charters_is_replaced_not_shown() -> None:
    forged = Failed(code=ErrorCode.PROVIDER_ERROR, message="x", meta={"errorId": SECRET})
    shown = redact(forged)
    assert SECRET not in shown.model_dump_json()
    assert str((shown.meta or {})["errorId"]).startswith("err_")


@pytest.mark.parametrize("code", sorted(set(ErrorCode) - SERVER_FAULT_CODES))
def test_every_other_code_is_the_authors_answer_and_passes_unchanged(code: ErrorCode) -> None:
    answer = Failed(code=code, message="No trip 'trp_1' in your tenant.", meta={"reason": "x"})
    assert redact(answer) is answer
