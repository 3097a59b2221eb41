"""A child process of the effect battery. Run by path::

    python tests/battery/effects_child.py crash URL REQUEST_ID EFFECTS
    python tests/battery/effects_child.py work URL WORKERS

- ``crash``: one ``bookings.refund`` call staging ``EFFECTS`` effects, on a host whose
  effect lease is one second; at ``after_commit_before_response`` (committed, nothing
  delivered) it prints ``at after_commit_before_response`` and blocks until SIGKILLed.
- ``work``: prints ``ready``, waits for a line on stdin (so every process starts racing at
  once), then runs ``WORKERS`` workers side by side until no effect is pending; prints
  the attempts each made as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

from charter.ledger import FaultPoint
from charter.store import SqlStore

# Run by path, Python puts this folder on sys.path (the support module beside it imports);
# the repository root goes there too, so that the support module can import tests.builders.
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))

from effects_support import AGENT, effects_host


def hang(point: FaultPoint) -> None:
    if point != "after_commit_before_response":
        return
    print(f"at {point}", flush=True)
    time.sleep(3600)  # blocks the event loop after the commit until killed


async def crash(url: str, request_id: str, effects: str) -> None:
    async with SqlStore(url, pool_size=2) as store:
        host, _ = await effects_host(store, lease=timedelta(seconds=1), fault_hook=hang)
        arguments = {"booking_id": "bk_1", "amount_cents": 500, "effects": int(effects)}
        await host.invoke(
            "bookings.refund", {**arguments, "_charter": {"requestId": request_id}}, AGENT
        )
    print("never reached the fault point", flush=True)


async def work(url: str, workers: str) -> None:
    async with SqlStore(url, pool_size=int(workers) + 1) as store:
        host, _ = await effects_host(store)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

        async def one(name: str) -> int:
            made = 0
            while True:
                claimed = await host.effects.run_due(worker=name, limit=10)
                made += claimed
                if claimed == 0:
                    pending, _ = await host.effects.backlog()
                    if pending == 0:
                        return made
                    await asyncio.sleep(0.01)

        names = [f"{os.getpid()}-{n}" for n in range(int(workers))]
        made = await asyncio.gather(*(one(name) for name in names))
        print(json.dumps(dict(zip(names, made, strict=True))), flush=True)


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    asyncio.run(crash(*rest) if command == "crash" else work(*rest))
