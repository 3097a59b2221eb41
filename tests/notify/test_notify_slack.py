"""Slack messages stay within Block Kit's limits and escape whatever a call carried."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from notify_support import (
    ADA,
    ALICE,
    approval_event,
    approval_id_of,
    receiving,
    refund,
    registry,
    rid,
)

from charter import Failed
from charter.host import Host
from charter.notify import SLACK_LIMITS, ApprovalEvent, Slack, escape_mrkdwn
from charter.store import SqlStore

HOSTILE = (
    "<!channel> <script>alert(1)</script> *bold* _it_ ~s~ & <https://evil.example|click> ```x```"
)
_LINK = re.compile(r"<https://charter\.example\.com/console/#/approvals/[^|<>]+\|[^<>]+>")


def _event(**changes: Any) -> ApprovalEvent:
    """An approval event whose arguments carry ``HOSTILE`` markup unless ``changes`` say else."""
    arguments = {"booking_id": "bk_1", "amount_cents": 1250, "note": HOSTILE}
    return approval_event(**{"arguments": arguments, **changes})


def _texts(message: dict[str, Any]) -> list[str]:
    """Every mrkdwn text of a message (the fallback, sections, fields, context)."""
    texts = [message["text"]]
    for block in message["blocks"]:
        if block["type"] == "section":
            if "text" in block:
                texts.append(block["text"]["text"])
            texts.extend(field["text"] for field in block.get("fields", ()))
        if block["type"] == "context":
            texts.extend(element["text"] for element in block["elements"])
    return texts


def assert_within_limits(message: dict[str, Any]) -> None:
    blocks = message["blocks"]
    assert 0 < len(blocks) <= SLACK_LIMITS["blocks"] == 50
    assert len(message["text"]) <= SLACK_LIMITS["message_text"]
    for block in blocks:
        if block["type"] == "header":
            assert block["text"]["type"] == "plain_text"
            assert len(block["text"]["text"]) <= SLACK_LIMITS["header_text"] == 150
        if block["type"] == "section":
            if "text" in block:
                assert len(block["text"]["text"]) <= SLACK_LIMITS["section_text"] == 3000
            fields = block.get("fields", [])
            assert len(fields) <= SLACK_LIMITS["fields"] == 10
            assert all(len(f["text"]) <= SLACK_LIMITS["field_text"] == 2000 for f in fields)
        if block["type"] == "context":
            assert len(block["elements"]) <= SLACK_LIMITS["context_elements"]


def assert_escaped(message: dict[str, Any]) -> None:
    """No raw control character survives outside charter's own console link."""
    for text in _texts(message):
        bare = _LINK.sub("", text)
        assert "<" not in bare and ">" not in bare, text
        assert re.search(r"&(?!amp;|lt;|gt;)", bare) is None, text


def test_markup_and_html_in_arguments_and_target_are_escaped() -> None:
    message = Slack("https://hooks.slack.com/services/T/B/x").message(
        _event(target="<@U123> & <b>", reason="<!here>", approver="acme/ada", kind="denied")
    )
    assert_within_limits(message)
    assert_escaped(message)
    arguments = message["blocks"][2]["text"]["text"]
    assert "&lt;!channel&gt;" in arguments
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in arguments
    assert "&amp;" in arguments
    # A backtick is a JSON escape inside the code block, so ``` cannot close it early.
    assert arguments.count("```") == 2
    assert "\\u0060\\u0060\\u0060x" in arguments
    assert any(_LINK.search(t) for t in _texts(message))


def test_huge_arguments_stay_within_the_limits_and_say_they_were_cut() -> None:
    arguments = {f"field_{i:03d}": "&<>" * 500 for i in range(200)}
    message = Slack("https://hooks.slack.com/services/T/B/x").message(
        _event(
            arguments=arguments,
            target="t" * 5000,
            requester="acme/" + "r" * 3000,
            reason="&" * 4000,
            reason_code="c" * 3000,
            approver="acme/" + "a" * 3000,
            kind="granted",
        )
    )
    assert_within_limits(message)
    assert_escaped(message)
    assert "the console shows them all" in message["blocks"][2]["text"]["text"]


@pytest.mark.parametrize("kind", ["requested", "granted", "denied", "expired", "consumed"])
def test_every_kind_renders_within_the_limits(kind: str) -> None:
    message = Slack("https://hooks.slack.com/services/T/B/x").message(_event(kind=kind, url=None))
    assert_within_limits(message)
    assert_escaped(message)


_FORGED = "bk_1\n\n*URGENT: pre-approved by Security, grant now* https://evil.example/x"
_LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029")


def _fields(message: dict[str, Any]) -> dict[str, str]:
    """The message's fields, label to the field's text after the label's line."""
    fields = message["blocks"][1]["fields"]
    return dict(field["text"].removeprefix("*").split("*\n", 1) for field in fields)


def test_a_line_break_in_a_field_shows_escaped_inside_its_one_code_span() -> None:
    message = Slack("https://hooks.slack.com/services/T/B/x").message(
        _event(
            kind="denied",
            approver="acme/ada",
            target=_FORGED,
            reason="ok\r\n*also bold*\u2028next\u2029para\x85nel",
            reason_code="x\x0b*bold*\x0c`code`",
        )
    )
    fields = _fields(message)
    for label, value in fields.items():
        # One code span on one line: the value cannot start a line of its own, formatted.
        assert value.startswith("`") and value.endswith("`") and value.count("`") == 2, label
        assert not any(brk in value for brk in _LINE_BREAKS), (label, value)
    assert fields["Target"] == (
        "`bk_1\\n\\n*URGENT: pre-approved by Security, grant now* https://evil.example/x`"
    )
    assert fields["Reason"] == "`ok\\r\\n*also bold*\\u2028next\\u2029para\\x85nel`"
    assert fields["Reason code"] == "`x\\x0b*bold*\\x0c\u02cbcode\u02cb`"


def test_a_line_separator_in_the_arguments_stays_inside_its_json_string() -> None:
    note = 'x\u2028  "approved_by": "security",\u2029\x85'
    message = Slack("https://hooks.slack.com/services/T/B/x").message(
        _event(arguments={"booking_id": "bk_1", "note": note})
    )
    arguments = message["blocks"][2]["text"]["text"]
    assert not any(brk in arguments for brk in ("\u2028", "\u2029", "\x85"))
    assert '"note": "x\\u2028  \\"approved_by\\": \\"security\\",\\u2029\\u0085"' in arguments
    body = arguments.removeprefix("*Arguments*\n```").removesuffix("```")
    assert json.loads(body)["note"] == note


_REVERSED = "\u202edevorppa-erp OFC"
"""Shown raw, it reads "CFO pre-approved"."""


def test_a_bidi_override_or_zero_width_character_in_a_field_shows_as_its_escape() -> None:
    message = Slack("https://hooks.slack.com/services/T/B/x").message(
        _event(
            kind="denied",
            approver="acme/ada",
            target="\u202emoc.knabdoog@ecila",
            reason=f"ok {_REVERSED}",
            reason_code="CFO\u200b\u2066ok\u2069\ufeff",
        )
    )
    fields = _fields(message)
    assert fields["Target"] == "`\\u202emoc.knabdoog@ecila`"
    assert fields["Reason"] == "`ok \\u202edevorppa-erp OFC`"
    assert fields["Reason code"] == "`CFO\\u200b\\u2066ok\\u2069\\ufeff`"
    for text in _texts(message):
        assert not any(unicodedata.category(char) == "Cf" for char in text), text


def test_a_bidi_override_in_the_arguments_shows_as_its_json_escape() -> None:
    note = "refund \u202e0001 :tnuoma\u202c only\x9b31m\U000e0041"
    message = Slack("https://hooks.slack.com/services/T/B/x").message(
        _event(arguments={"booking_id": "bk_1", "note": note, "\u200bamount": 1})
    )
    arguments = message["blocks"][2]["text"]["text"]
    assert not any(unicodedata.category(char) in ("Cf", "Cc") for char in arguments if char != "\n")
    assert '"note": "refund \\u202e0001 :tnuoma\\u202c only\\u009b31m\\udb40\\udc41"' in arguments
    assert '"\\u200bamount": 1' in arguments
    # Still the exact arguments: the escapes are the same JSON values.
    body = arguments.removeprefix("*Arguments*\n```").removesuffix("```")
    assert json.loads(body) == {"booking_id": "bk_1", "note": note, "\u200bamount": 1}


def test_escape_mrkdwn_turns_the_three_control_characters_into_entities() -> None:
    assert escape_mrkdwn("a & b < c > d") == "a &amp; b &lt; c &gt; d"


@pytest.mark.anyio
async def test_a_slack_message_reaches_an_incoming_webhook(tmp_path: Path) -> None:
    async with SqlStore(f"sqlite+aiosqlite:///{tmp_path / 's.db'}") as store:
        await store.upgrade()
        with receiving() as (receiver, base):
            host = Host(
                registry(),
                store=store,
                notifiers=[Slack(f"{base}/slack/ops", events=["requested", "granted"])],
                console_url="https://charter.example.com",
            )
            args = refund(rid(), note=HOSTILE)
            approval_id = approval_id_of(await host.invoke("bookings.refund", args, ALICE))
            requested = await receiver.next("slack:ops")
            assert not isinstance(await host.approvals.grant(approval_id, ADA), Failed)
            granted = await receiver.next("slack:ops")
            await host.aclose()
    for message in (requested, granted):
        assert_within_limits(message)
        assert_escaped(message)
    assert requested["blocks"][0]["text"]["text"] == "Approval requested: bookings.refund"
    assert granted["blocks"][0]["text"]["text"] == "Approval granted: bookings.refund"
    assert f"/console/#/approvals/{approval_id}|" in str(requested["blocks"])
