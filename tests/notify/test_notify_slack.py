"""Slack messages stay within Block Kit's limits and escape whatever a call carried."""

from __future__ import annotations

import re
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
