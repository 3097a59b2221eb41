"""Approval notifications: ``Host(notifiers=[Webhook(url, secret=…), Slack(url)])``.

- ``ApprovalEvent``: one change of one approval (requested, granted, denied, expired,
  consumed), with a stable ``id`` receivers deduplicate by.
- ``Notifier``: the protocol a notifier implements (``name``, ``wants``, ``send``).
- ``Webhook``: signed per Standard Webhooks. ``Slack``: Block Kit to an incoming webhook.

Sending needs the ``notify`` extra (httpx, standardwebhooks); docs/notifications.md.
"""

from __future__ import annotations

from ..host._notices import ApprovalEvent as ApprovalEvent
from ..host._notices import Notifier as Notifier
from ..host._notices import approval_link as approval_link
from ..ledger.approvals import ApprovalChange as ApprovalChange
from ._http import NotificationFailed as NotificationFailed
from ._slack import SLACK_LIMITS as SLACK_LIMITS
from ._slack import Slack as Slack
from ._slack import escape_mrkdwn as escape_mrkdwn
from ._webhook import Webhook as Webhook

__all__ = (
    "SLACK_LIMITS",
    "ApprovalChange",
    "ApprovalEvent",
    "NotificationFailed",
    "Notifier",
    "Slack",
    "Webhook",
    "approval_link",
    "escape_mrkdwn",
)
