"""One effect worker in a process of its own: ``python -m bench._effect_worker URL NAME``.

The worker-throughput case (``bench/bench_effects.py``) compares four workers with one, and
workers are separate processes in production (``charter worker``): in one process, four
would share one interpreter and its CPU. This process opens a ``SqlStore`` on ``URL``
(four connections), builds a host whose ``notes.notify`` effect calls a provider taking
2 ms, prints ``ready`` and then, for every ``drain`` line on its standard input, drains
the due effects once (``host.effects.work(once=True, worker=NAME)``) and prints how many
it delivered. It ends at the end of its input.
"""

from __future__ import annotations

import asyncio
import sys

from bench.bench_effects import PROVIDER_LATENCY, Provider, effects_registry
from charter.audit import MemoryAuditSink
from charter.host import Host
from charter.store import SqlStore


async def serve(url: str, name: str) -> None:
    """Answer ``drain`` lines on stdin with the number of effects delivered."""
    async with SqlStore(url, pool_size=4) as store:
        host = Host(
            effects_registry(Provider(PROVIDER_LATENCY)), store=store, audit=MemoryAuditSink()
        )
        print("ready", flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            if line.strip() != "drain":
                raise SystemExit(f"unknown command {line!r}")
            delivered = await host.effects.work(once=True, worker=name)
            print(delivered, flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m bench._effect_worker URL NAME")
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
