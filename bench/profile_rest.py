"""Instructions per REST call, in process: ``python -m bench.profile_rest KIND N``.

Builds one app of ``bench.load_servers`` (``charter-rest``, ``fastapi`` or ``starlette``),
runs its lifespan, and calls ``POST /v1/tools/add:call`` N times with the request the
throughput case sends (a raw ASGI driver: no server, no sockets), checking each answer.
The loop is marked by a call to ``os.getppid()`` before and after it, so callgrind can
dump the loop's instructions alone (the second of three parts; divide by N)::

    valgrind --tool=callgrind --dump-before='*getppid*' --callgrind-out-file=/tmp/cg.out \\
        .venv/bin/python -m bench.profile_rest charter-rest 2000
    grep '^summary' /tmp/cg.out.2

``--profile`` prints cProfile's top functions instead (by own time, in process);
``--cpu`` prints the loop's CPU time per request (``time.process_time``), for quick
comparisons side by side (noisy on a shared machine; callgrind's counts are not).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from bench.load_servers import KINDS, TOKEN, post_scope
from bench.profile_mcp import between_requests

BODY = b'{"a": 1, "b": 2}'
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"user-agent", b"wrk"),
    (b"authorization", f"Bearer {TOKEN}".encode()),
    (b"content-type", b"application/json"),
    (b"content-length", str(len(BODY)).encode()),
]
EXPECT = b'{"output":{"result":3},"replayed":false}'


async def _call(app: Any) -> None:
    sent: list[dict[str, Any]] = []
    done = False

    async def receive() -> dict[str, Any]:
        nonlocal done
        if done:
            await asyncio.Event().wait()  # pragma: no cover - a second read waits
        done = True
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(post_scope("/v1/tools/add:call", list(HEADERS)), receive, send)
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    if status != 200 or body.replace(b" ", b"") != EXPECT:
        raise SystemExit(f"unexpected answer {status} {body!r}")


async def run(kind: str, n: int, profiler: Any = None) -> None:
    """Build ``kind``'s app, enter its lifespan, call it ``n`` times (under ``profiler``)."""
    app: Any = KINDS[kind]()
    router = getattr(app, "router", None)
    lifespan = router.lifespan_context(app) if router is not None else None
    if lifespan is not None:
        await lifespan.__aenter__()
    try:
        await _call(app)  # warm: first-call caches
        os.getppid()  # callgrind: the loop starts
        if profiler is not None:
            profiler.enable()
        for _ in range(n):
            await _call(app)
            await between_requests()
        if profiler is not None:
            profiler.disable()
        os.getppid()  # callgrind: the loop ended
    finally:
        if lifespan is not None:
            await lifespan.__aexit__(None, None, None)


class _CpuTimer:
    """A stand-in profiler: the CPU time between ``enable`` and ``disable``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def enable(self) -> None:
        self._started = time.process_time()

    def disable(self) -> None:
        self.seconds += time.process_time() - self._started


def main(argv: list[str]) -> None:
    """``KIND N [--profile]``."""
    profile = "--profile" in argv
    args = [a for a in argv if not a.startswith("--")]
    kind, n = args[0], int(args[1])
    if "--cpu" in argv:
        timer = _CpuTimer()
        asyncio.run(run(kind, n, timer))
        print(f"{kind}: {timer.seconds / n * 1e6:.1f} us CPU per request")
        return
    if not profile:
        asyncio.run(run(kind, n))
        return
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    asyncio.run(run(kind, n, profiler))
    pstats.Stats(profiler).sort_stats("tottime").print_stats(60)


if __name__ == "__main__":
    main(sys.argv[1:])
