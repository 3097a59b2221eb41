r"""``Slack``: approval events as Block Kit messages to an incoming-webhook URL.

Everything taken from the call (tool, target, arguments, requester, reasons) is escaped
for mrkdwn (``&``, ``<``, ``>`` become entities, so no mention, link or HTML tag can be
injected), kept on the line it belongs to (a line break in a field shows as ``\n``), shown as
it is (a bidi override or a zero-width character shows as ``\u202e``, ``\u200b``), and
cut to Block Kit's documented limits: 50 blocks a message, 3,000 characters a section's
text, 10 fields of 2,000 each, 150 for a header.
"""

from __future__ import annotations

import json
from typing import Any

from .._safe_log import escape_line_breaks
from ..host._notices import ApprovalEvent
from ._http import HttpNotifier

__all__ = ("SLACK_LIMITS", "Slack", "escape_mrkdwn")

SLACK_LIMITS = {
    "blocks": 50,
    "section_text": 3000,
    "fields": 10,
    "field_text": 2000,
    "header_text": 150,
    "context_elements": 10,
    "message_text": 3000,
}
"""Block Kit's documented limits this renderer keeps to (``message_text`` is charter's
own cap on the notification fallback text)."""

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_TITLES: dict[str, str] = {
    "requested": "Approval requested",
    "granted": "Approval granted",
    "denied": "Approval denied",
    "expired": "Approval expired unused",
    "consumed": "Approved call ran",
}
_ELLIPSIS = "…"
_GRAVE = "\u02cb"
"""MODIFIER LETTER GRAVE ACCENT, in place of a backtick inside inline code."""
_BACKTICK_AS_JSON = str.maketrans({"`": "\\u0060"})
"""A backtick would close the arguments' code block; inside a JSON string (the only place
``json.dumps`` writes one) its escape is the same value."""


def escape_mrkdwn(text: str) -> str:
    """``text`` with Slack's control characters as entities (``&amp;``, ``&lt;``, ``&gt;``)."""
    return "".join(_ESCAPES.get(char, char) for char in text)


def _fit(text: str, limit: int) -> str:
    """``text`` escaped, cut (on a character, never inside an entity) to ``limit`` characters."""
    escaped = escape_mrkdwn(text)
    if len(escaped) <= limit:
        return escaped
    out: list[str] = []
    size = 0
    for char in text:
        piece = _ESCAPES.get(char, char)
        if size + len(piece) > limit - len(_ELLIPSIS):
            break
        out.append(piece)
        size += len(piece)
    return "".join(out) + _ELLIPSIS


def _code(text: str, limit: int) -> str:
    r"""Inline code of ``text`` on one line, escaped.

    A line break would end the span and put the rest of the value on a line of its own,
    formatted, so it shows escaped (``\n``, ``\u2028``, as in a log line), and so does a
    format character (``\u202e``, ``\u200b``), which would make the value read otherwise
    than it is; a backtick would end the span too, so it shows as U+02CB.
    """
    shown = escape_line_breaks(text.replace("`", _GRAVE), format_characters=True)
    return "`" + _fit(shown, limit - 2) + "`"


def _json_escape(char: str) -> str:
    r"""``char`` as a JSON string escape (``\u0085``; a surrogate pair beyond the BMP)."""
    return json.dumps(char)[1:-1]


def _json_lines(value: object) -> str:
    """``value`` as indented JSON whose strings hold no character that hides or breaks a line.

    ``json.dumps(ensure_ascii=False)`` leaves C1 controls, line separators and format
    characters raw: a line break would start a line that reads as another argument, a bidi
    override would reverse what the approver reads. Each is written as its JSON escape
    (the same value); the indentation's own newlines are the only raw ones.
    """
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    return "\n".join(
        escape_line_breaks(line, format_characters=True, escape=_json_escape)
        for line in text.translate(_BACKTICK_AS_JSON).split("\n")
    )


class Slack(HttpNotifier):
    """Posts each event as a Block Kit message to a Slack incoming webhook.

    Built like ``HttpNotifier``; the webhook URL is a secret: keep it in the environment.
    """

    kind = "slack"

    def message(self, event: ApprovalEvent) -> dict[str, Any]:
        """The Block Kit message of an event, within Block Kit's limits."""
        title = f"{_TITLES[event.kind]}: {event.tool}"
        if len(title) > SLACK_LIMITS["header_text"]:
            title = title[: SLACK_LIMITS["header_text"] - 1] + _ELLIPSIS
        field_limit = SLACK_LIMITS["field_text"]
        fields = [
            ("Tool", f"{event.tool}@{event.capability_version}"),
            ("Risk", event.risk),
            ("Target", event.target if event.target is not None else "(none)"),
            ("Requester", event.requester),
            ("Tenant", event.tenant_id),
            ("Expires", event.expires_at.isoformat(timespec="seconds")),
        ]
        if event.approver is not None:
            fields.append(("Decided by" if event.kind != "consumed" else "Run by", event.approver))
        if event.reason:
            fields.append(("Reason", event.reason))
        if event.reason_code:
            fields.append(("Reason code", event.reason_code))
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": title}},
            {
                "type": "section",
                "fields": [
                    {"type": "mrkdwn", "text": f"*{label}*\n" + _code(value, field_limit - 20)}
                    for label, value in fields[: SLACK_LIMITS["fields"]]
                ],
            },
            {"type": "section", "text": {"type": "mrkdwn", "text": self._arguments(event)}},
        ]
        if event.url is not None:
            link = escape_mrkdwn(event.url).replace("|", "%7C")
            blocks.append(
                {
                    "type": "section",
                    "text": {
                        "type": "mrkdwn",
                        "text": f"<{link}|Open the approval in the console>",
                    },
                }
            )
        blocks.append(
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": "approval " + _code(event.approval_id, 300)},
                    {"type": "mrkdwn", "text": "event " + _code(event.id, 300)},
                ],
            }
        )
        fallback = f"{_TITLES[event.kind]}: {event.tool} ({event.risk}) for {event.requester}"
        return {"text": _fit(fallback, SLACK_LIMITS["message_text"]), "blocks": blocks}

    def _arguments(self, event: ApprovalEvent) -> str:
        """The exact arguments as JSON in a code block, escaped, cut to a section's limit."""
        text = _json_lines(event.arguments)
        head, tail = "*Arguments*\n```", "```"
        room = SLACK_LIMITS["section_text"] - len(head) - len(tail)
        body = _fit(text, room)
        if body.endswith(_ELLIPSIS) and event.url is not None:
            body = _fit(text, room - 40)[:-1] + "\n… (cut: the console shows them all)"
        return head + body + tail

    async def send(self, event: ApprovalEvent) -> None:
        """Post one event's message.

        Raises:
            NotificationFailed: Slack answered other than 2xx, or not at all.
        """
        body = json.dumps(self.message(event), ensure_ascii=False).encode()
        await self.post(body, {"content-type": "application/json"})
