"""A child process that makes one ledgered call and dies at a named fault point.

Run by path (so ``battery_support`` beside it imports)::

    python tests/battery/crash_child.py URL POINT MODE TOOL ARGUMENTS_JSON EPOCH

- ``URL``: the store's database (the parent's test database).
- ``POINT``: a ``charter.ledger.FaultPoint`` (``after_claim``, ``after_mutation``,
  ``before_commit``, ``after_commit_before_response``), or ``none``: then the child is
  just another replica making the call.
- ``MODE``: ``exit`` calls ``os._exit(3)`` at the point: no cleanup, no rollback, no
  flush, the process is simply gone. ``hang`` prints ``at POINT`` and blocks, so the
  parent can SIGKILL it there (inside the open write transaction).
- ``TOOL``, ``ARGUMENTS_JSON``: the call, made as ``battery_support.ALICE``.
- ``EPOCH``: the host's clock, frozen at this ISO time (the parent's clock), so the child
  and the parent agree on what has expired.

If the point is never reached (a replay, a refusal) the child prints the outcome as JSON
and exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

from charter.host import Host
from charter.ledger import FaultHook, FaultPoint
from charter.outcome import outcome_adapter
from charter.store import SqlStore

# Run by path, Python puts this folder on sys.path (the support module beside it imports);
# the repository root goes there too, so that the support module can import tests.builders.
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))

from battery_support import ALICE, Battery, Clock

CRASHED = 3
"""The exit status of a child that died at its fault point."""


def fault_hook(point: str, mode: str) -> FaultHook:
    def hook(reached: FaultPoint) -> None:
        if reached != point:
            return
        if mode == "exit":
            os._exit(CRASHED)
        print(f"at {reached}", flush=True)
        time.sleep(3600)  # blocks the event loop inside the transaction until killed

    return hook


async def main(url: str, point: str, mode: str, tool: str, arguments: str, epoch: str) -> None:
    async with SqlStore(url) as store:
        battery = Battery()
        host = Host(
            battery.registry,
            store=store,
            clock=Clock(datetime.fromisoformat(epoch)),
            fault_hook=fault_hook(point, mode),
            in_progress_wait=30,
        )
        outcome = await host.invoke(tool, json.loads(arguments), ALICE)
        print(outcome_adapter.dump_json(outcome).decode(), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
