"""``charter._safe_log``: log records whose text untrusted input cannot break into lines."""

from __future__ import annotations

import logging

import pytest

from charter._safe_log import escape_line_breaks, log_exception

FORGED = "2026-01-01 00:00:00 INFO charter: approval apr_1 granted"
logger = logging.getLogger("charter.test_safe_log")


def test_line_breaks_and_control_characters_are_escaped_and_the_rest_kept() -> None:
    text = "a\nb\rc\x00d\x1b[31me\u2028f\u2029g\x85h\tété ✓"
    assert escape_line_breaks(text) == "a\\nb\\rc\\x00d\\x1b[31me\\u2028f\\u2029g\\x85h\tété ✓"


def _raise_chained() -> None:
    try:
        raise KeyError(f"inner\n{FORGED}")
    except KeyError as exc:
        error = RuntimeError(f"outer\r\n{FORGED}")
        error.add_note(f"note\n{FORGED}")
        raise error from exc


def test_a_logged_exception_is_one_record_no_line_of_which_its_text_controls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="charter"):
        try:
            _raise_chained()
        except RuntimeError:
            log_exception(logger, "tool %r raised (error id %s)", f"x\n{FORGED}", "err_1")
    [record] = caplog.records
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
    assert (
        record.funcName
        == "test_a_logged_exception_is_one_record_no_line_of_which_its_text_controls"
    )
    rendered = logging.Formatter("%(levelname)s %(name)s: %(message)s").format(record)
    assert not any(line.startswith(FORGED) for line in rendered.splitlines())
    assert rendered.count(f"\\n{FORGED}") == 4  # the tool name, both messages, the note
    assert "Traceback (most recent call last):" in rendered
    assert "The above exception was the direct cause" in rendered


def test_an_explicit_exception_is_logged_outside_an_except_block(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = ValueError(f"bad\n{FORGED}")
    with caplog.at_level(logging.WARNING, logger="charter"):
        log_exception(logger, "failed", exc=error, level=logging.WARNING)
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert f"ValueError: bad\\n{FORGED}" in caplog.text


def test_nothing_is_built_for_a_level_the_logger_drops(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.CRITICAL, logger="charter"):
        log_exception(logger, "dropped", exc=ValueError("x"))
    assert caplog.records == []


def test_the_members_of_an_exception_group_are_escaped_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    group = ExceptionGroup("two failed", [ValueError(f"a\n{FORGED}"), KeyError("b")])
    with caplog.at_level(logging.ERROR, logger="charter"):
        log_exception(logger, "batch failed", exc=group)
    assert not any(line.startswith(FORGED) for line in caplog.text.splitlines())
    assert f"| ValueError: a\\n{FORGED}" in caplog.text
