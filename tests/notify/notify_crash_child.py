"""A process killed (SIGKILL) after an approval change committed, before its notice went.

argv: the database URL, the receiver URL, the request id, the kind of change. The one
notifier sends only that kind; the process makes the change (for ``expired``: requests an
approval, lets its expiry pass and runs a worker pass) and dies the moment the delivery
of the committed notice starts, before a byte reaches the receiver.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import UTC, datetime, timedelta
from typing import cast

from notify_support import ADA, ALICE, SECRET, approval_id_of, refund, registry

from charter.host import Host
from charter.notify import ApprovalChange, ApprovalEvent, Webhook
from charter.outcome import Failed
from charter.store import SqlStore


class DyingWebhook(Webhook):
    """The receiver's webhook (same name, same URL) whose process dies as it sends."""

    async def send(self, event: ApprovalEvent) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


async def main(db: str, url: str, request_id: str, kind: ApprovalChange) -> None:
    clock = Clock()
    async with SqlStore(db) as store:
        host = Host(
            registry(),
            store=store,
            clock=clock,
            notifiers=[DyingWebhook(url, secret=SECRET, events=[kind])],
        )
        requested = await host.invoke("bookings.refund", refund(request_id), ALICE)
        approval_id = approval_id_of(requested)
        if kind == "expired":
            clock.now += timedelta(hours=1, seconds=1)
            await host.effects.work(once=True)
        elif kind in ("granted", "consumed"):
            assert not isinstance(await host.approvals.grant(approval_id, ADA), Failed)
            if kind == "consumed":
                await host.invoke("bookings.refund", refund(request_id, approval_id), ALICE)
        elif kind == "denied":
            assert not isinstance(await host.approvals.deny(approval_id, ADA), Failed)
        raise SystemExit(f"no {kind} notice was delivered: the process should be dead")


if __name__ == "__main__":
    db, url, request_id, kind = sys.argv[1:]
    asyncio.run(main(db, url, request_id, cast(ApprovalChange, kind)))  # the test passes a kind
