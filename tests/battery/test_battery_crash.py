"""Reliability battery, crash injection (reliability.md §5.2: K01, K02, K05, K07).

A real child process (``crash_child.py``) opens the test's database, makes one ledgered
call and dies at a named fault point of the gate: ``os._exit(3)`` there, or a SIGKILL from
the parent while it waits there inside its write transaction. The parent then looks at
the database from outside and retries through its own host, as a client would.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from battery_support import (
    ALICE,
    APPROVALS,
    EFFECTS,
    LEDGER,
    Env,
    EnvFactory,
    Observer,
    approved,
    burst,
    completed,
    executed_once,
    refund,
    rid,
    widget,
)

from charter import Completed

# Not `serial`: each test kills only its own child process, on its own database (a file in
# tmp_path or a schema of its own), so the parallel run's other tests cannot notice.
pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CHILD = Path(__file__).with_name("crash_child.py")
CRASHED = 3
RESUMERS = 16
ITERATIONS = 20


async def child(
    env: Env, store_url: str, point: str, tool: str, arguments: dict[str, Any], *, kill: bool
) -> None:
    """Run ``crash_child.py`` and see it die at ``point``: by itself, or SIGKILLed there."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        store_url,
        point,
        "hang" if kill else "exit",
        tool,
        json.dumps(arguments),
        env.clock().isoformat(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        if kill:
            assert process.stdout is not None
            line = await process.stdout.readline()
            assert line.decode().strip() == f"at {point}", line
            process.send_signal(signal.SIGKILL)
        out, err = await process.communicate()
    expected = -signal.SIGKILL if kill else CRASHED
    assert process.returncode == expected, (process.returncode, out.decode(), err.decode())


async def nothing_left_then_retried_once(
    env: Env, observer: Observer, arguments: dict[str, Any]
) -> None:
    """The crashed call left no row; of two retries the first runs, the second replays it."""
    assert await observer.count(LEDGER) == 0
    assert await observer.count(EFFECTS) == 0
    first, second = [
        completed(await env.host.invoke("create_widget", arguments, ALICE)) for _ in range(2)
    ]
    assert not first.replayed and second == first.model_copy(update={"replayed": True})
    assert isinstance(first.output, dict)
    assert await observer.effect_ids() == [first.output["widget_id"]]


@pytest.mark.parametrize("point", ["after_claim", "after_mutation", "before_commit"])
async def test_K01_crash_between_claim_and_commit(
    make_env: EnvFactory, observer: Observer, store_url: str, point: str
) -> None:
    env = await make_env(in_progress_wait=30)
    arguments = widget("w", rid())
    await child(env, store_url, point, "create_widget", arguments, kill=False)
    await nothing_left_then_retried_once(env, observer, arguments)


async def test_K02_crash_after_commit_before_response(
    make_env: EnvFactory, observer: Observer, store_url: str
) -> None:
    env = await make_env()
    arguments = widget("w", rid())
    await child(
        env, store_url, "after_commit_before_response", "create_widget", arguments, kill=False
    )
    [effect] = await observer.effect_ids()
    assert await observer.count(LEDGER) == 1
    # The caller never saw the response; its retries get the stored one, same widget.
    for _ in range(2):
        replay = completed(await env.host.invoke("create_widget", arguments, ALICE))
        assert replay.replayed and isinstance(replay.output, dict)
        assert replay.output["widget_id"] == effect
    assert env.battery.runs == 0
    assert await observer.effect_ids() == [effect]


async def test_K05_sqlite_kill9_recovery(
    make_env: EnvFactory, observer: Observer, store_url: str, store_backend: str
) -> None:
    # Reliability.md lists K05 for SQLite; the same kill on PostgreSQL shows the server
    # discards the dead client's open transaction just as well.
    env = await make_env(in_progress_wait=30)
    arguments = widget("w", rid())
    await child(env, store_url, "after_mutation", "create_widget", arguments, kill=True)
    if store_backend == "sqlite":
        path = sa.make_url(store_url).database
        assert path is not None
        with sqlite3.connect(path) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        raw.close()
    await nothing_left_then_retried_once(env, observer, arguments)


async def resume_together(env: Env, arguments: dict[str, Any], *, hold: bool) -> Completed:
    """``RESUMERS`` concurrent retries of one approved call; one ran, all saw its result."""
    outcomes = await burst(
        env.host, env.battery, [("refund_order", arguments, ALICE)] * RESUMERS, hold=hold
    )
    return executed_once(outcomes)


async def test_K07_deferred_resume_exactly_once(
    make_env: EnvFactory, observer: Observer, store_url: str
) -> None:
    # A paused call (awaiting approval) is resumed, once granted, by concurrent retries
    # with the approvalId; half the bursts hold the winner's transaction open until
    # every resumer has called, half let it commit as soon as it can.
    env = await make_env(pool_size=RESUMERS + 4, in_progress_wait=60)
    for iteration in range(ITERATIONS):
        request_id = rid()
        order = f"o-{iteration}"
        approval_id = await approved(env.host, refund(order, 100, request_id))
        resume = refund(order, 100, request_id, approval_id=approval_id)
        first = await resume_together(env, resume, hold=iteration % 2 == 0)
        assert isinstance(first.output, dict)
        assert await observer.effect_ids(request_id=request_id) == [first.output["refund_id"]]
        record = await env.store.get_approval(approval_id)
        assert record is not None and (record.status, record.consumed_by) == (
            "consumed",
            request_id,
        )
    assert env.battery.runs == ITERATIONS

    # Once after a crash mid-resume: the child dies after the handler wrote, before the
    # commit; the approval's consumption rolled back with everything else.
    request_id = rid()
    approval_id = await approved(env.host, refund("o-crash", 7, request_id))
    resume = refund("o-crash", 7, request_id, approval_id=approval_id)
    await child(env, store_url, "before_commit", "refund_order", resume, kill=False)
    assert await observer.count(EFFECTS, request_id=request_id) == 0
    assert await observer.count(LEDGER, request_id=request_id) == 0
    record = await env.store.get_approval(approval_id)
    assert record is not None and record.status == "approved"
    first = await resume_together(env, resume, hold=False)
    assert isinstance(first.output, dict)
    assert await observer.effect_ids(request_id=request_id) == [first.output["refund_id"]]
    assert await observer.count(APPROVALS, status="consumed") == ITERATIONS + 1
