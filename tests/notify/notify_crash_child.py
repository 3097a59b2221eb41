"""A serving process killed (SIGKILL) after an approved call committed, before its notice went.

argv: the database URL, the receiver URL, the request id. Prints the approval id, then
dies at the gate's ``after_commit_before_response`` point of the approved call.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from notify_support import ADA, ALICE, SECRET, approval_id_of, refund, registry

from charter.host import Host
from charter.ledger import FaultPoint
from charter.notify import Webhook
from charter.store import SqlStore


def _die(point: FaultPoint) -> None:
    if point == "after_commit_before_response":
        os.kill(os.getpid(), signal.SIGKILL)


async def main(db: str, url: str, request_id: str) -> None:
    async with SqlStore(db) as store:
        host = Host(
            registry(),
            store=store,
            notifiers=[Webhook(url, secret=SECRET, events=["consumed"])],
            fault_hook=_die,
        )
        outcome = await host.invoke("bookings.refund", refund(request_id), ALICE)
        approval_id = approval_id_of(outcome)
        granted = await host.approvals.grant(approval_id, ADA)
        assert not hasattr(granted, "code"), granted
        print(approval_id, flush=True)
        await host.invoke("bookings.refund", refund(request_id, approval_id), ALICE)
        raise SystemExit("the fault hook did not kill the process")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
