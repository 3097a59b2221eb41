from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import to_json

from charter import (
    Completed,
    Deferred,
    Denied,
    ErrorCode,
    Failed,
    Interaction,
    InteractionRequired,
    ToolError,
)
from charter.errors import DEFAULT_NEXT_STEPS
from charter.outcome import failed, failed_from_error, outcome_adapter

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
texts = st.text(max_size=40)

interactions = st.builds(
    Interaction,
    id=texts,
    kind=st.sampled_from(["approval", "response"]),
    prompt=texts,
    metadata=st.none() | json_objects,
)

outcomes = st.one_of(
    st.builds(Completed, output=json_values, replayed=st.booleans()),
    st.builds(Denied, reason=texts),
    st.builds(
        Failed,
        code=st.sampled_from(ErrorCode),
        message=texts,
        retryable=st.booleans(),
        next_steps=st.lists(texts, max_size=3).map(tuple),
        meta=st.none() | json_objects,
        replayed=st.booleans(),
    ),
    st.builds(InteractionRequired, interaction=interactions, token=json_values),
    st.builds(Deferred, token=json_values),
)


@given(outcomes)
def test_every_outcome_round_trips_through_json(outcome: Any) -> None:
    text = outcome_adapter.dump_json(outcome)
    again = outcome_adapter.validate_json(text)
    assert again == outcome
    assert type(again) is type(outcome)
    assert json.loads(text)["kind"] == outcome.kind


@given(interactions)
def test_an_interaction_round_trips_through_json(interaction: Interaction) -> None:
    assert Interaction.model_validate_json(interaction.model_dump_json()) == interaction


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"kind": "completed", "output": {"a": 1}}, Completed(output={"a": 1})),
        ({"kind": "denied", "reason": "no"}, Denied(reason="no")),
        (
            {"kind": "failed", "code": "TIMEOUT", "message": "slow"},
            Failed(code=ErrorCode.TIMEOUT, message="slow"),
        ),
        (
            {
                "kind": "interaction-required",
                "interaction": {"id": "a1", "kind": "approval", "prompt": "OK?"},
            },
            InteractionRequired(interaction=Interaction(id="a1", kind="approval", prompt="OK?")),
        ),
        ({"kind": "deferred", "token": "t"}, Deferred(token="t")),
    ],
)
def test_outcomes_are_discriminated_by_kind(data: dict[str, Any], expected: object) -> None:
    assert outcome_adapter.validate_python(data) == expected


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "exploded"},
        {"output": 1},
        {"kind": "denied", "reason": "no", "extra": True},
        {"kind": "failed", "code": "NOT_A_CODE", "message": "x"},
    ],
)
def test_unknown_kinds_extra_fields_and_unknown_codes_do_not_parse(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        outcome_adapter.validate_python(data)


def test_outcomes_are_frozen() -> None:
    outcome = Denied(reason="no")
    with pytest.raises(ValidationError):
        outcome.reason = "yes"  # type: ignore[misc]  # the write the test expects refused


@pytest.mark.parametrize("code", list(ErrorCode))
def test_a_tool_error_without_next_steps_gets_the_defaults_for_its_code(code: ErrorCode) -> None:
    error = ToolError(code, "message")
    assert error.next_steps == DEFAULT_NEXT_STEPS[code]
    assert error.next_steps
    assert all(step.strip() for step in error.next_steps)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_retryable_by_default_only_for_codes_that_time_resolves(code: ErrorCode) -> None:
    retryable = {
        ErrorCode.PROVIDER_UNAVAILABLE,
        ErrorCode.REQUEST_IN_PROGRESS,
        ErrorCode.TIMEOUT,
        ErrorCode.RATE_LIMITED,
    }
    assert ToolError(code, "m").retryable is (code in retryable)


def test_the_raiser_decides_retryability_when_it_says_so() -> None:
    assert ToolError(ErrorCode.TIMEOUT, "m", retryable=False).retryable is False
    assert ToolError(ErrorCode.PROVIDER_ERROR, "m", retryable=True).retryable is True


def test_an_unknown_code_falls_back_to_provider_error() -> None:
    error = ToolError("SOMETHING_ELSE", "m")
    assert error.code is ErrorCode.PROVIDER_ERROR
    assert error.next_steps == DEFAULT_NEXT_STEPS[ErrorCode.PROVIDER_ERROR]
    assert error.retryable is False


def test_a_known_code_string_is_accepted() -> None:
    assert ToolError("NOT_FOUND", "m").code is ErrorCode.NOT_FOUND


def test_explicit_next_steps_replace_the_defaults() -> None:
    assert ToolError(ErrorCode.NOT_FOUND, "m", next_steps=["Search first."]).next_steps == (
        "Search first.",
    )


def test_confirmation_next_steps_say_to_retry_with_confirmed_true() -> None:
    steps = " ".join(ToolError(ErrorCode.CONFIRMATION_REQUIRED, "m").next_steps)
    assert '"confirmed": true' in steps
    assert '"_charter"' in steps


def test_approval_next_steps_name_the_approval_id_and_confirmation() -> None:
    steps = " ".join(ToolError(ErrorCode.APPROVAL_REQUIRED, "m").next_steps)
    assert "approvalId" in steps
    assert '"confirmed": true' in steps


def test_a_tool_error_becomes_a_failed_outcome_with_everything_kept() -> None:
    error = ToolError(
        ErrorCode.PROVIDER_UNAVAILABLE,
        "Down.",
        next_steps=["Wait."],
        meta={"reason": "maintenance", "until": 5},
    )
    assert failed_from_error(error) == Failed(
        code=ErrorCode.PROVIDER_UNAVAILABLE,
        message="Down.",
        retryable=True,
        next_steps=("Wait.",),
        meta={"reason": "maintenance", "until": 5},
    )
    assert failed_from_error(error).reason == "maintenance"


def test_failed_builds_an_outcome_with_defaults_and_meta() -> None:
    outcome = failed(ErrorCode.TIMEOUT, "Too slow.", reason="deadline")
    assert outcome.retryable is True
    assert outcome.next_steps == DEFAULT_NEXT_STEPS[ErrorCode.TIMEOUT]
    assert outcome.meta == {"reason": "deadline"}
    assert failed(ErrorCode.NOT_FOUND, "x").meta is None


def test_a_tool_errors_text_and_meta_that_utf8_cannot_encode_keep_their_words() -> None:
    # A handler quoting a file name decoded with surrogateescape: every transport must be
    # able to send the failure, so each lone surrogate becomes U+FFFD and nothing else.
    error = ToolError(
        ErrorCode.NOT_FOUND,
        "No file caf\udce9.txt.",
        next_steps=["List caf\udce9/ first."],
        meta={"name": "caf\udce9.txt", "sizes": [1, 2], "caf\udce9": True},
    )
    failure = failed_from_error(error)
    assert failure.message == "No file caf\ufffd.txt."
    assert failure.next_steps == ("List caf\ufffd/ first.",)
    assert failure.meta == {"name": "caf\ufffd.txt", "sizes": [1, 2], "caf\ufffd": True}
    assert json.loads(to_json(failure)) == failure.model_dump(mode="json")
