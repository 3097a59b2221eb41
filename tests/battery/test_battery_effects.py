"""Reliability battery, effects (docs/effects.md; reliability.md F01-F04).

The payment provider is outside charter and durable (``effects_support.Provider``): it
counts every call per idempotency key in its own table, so calls made by processes that
were killed are counted too. "Exactly once per key" is read there, from outside charter.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import uuid
from pathlib import Path
from typing import cast

import pytest
from effects_support import AGENT, effects_host
from tests.store.conftest import SqlStoreFactory
from typer.testing import CliRunner

from charter import Completed
from charter.cli import app
from charter.effects import EffectRecord
from charter.host import Host
from charter.store import SqlStore

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CHILD = Path(__file__).with_name("effects_child.py")
RACED = 1_000


async def _drain(host: Host) -> None:
    """Run worker passes until nothing is pending (waiting out leases and backoffs)."""
    async with asyncio.timeout(60):
        while (await host.effects.backlog())[0]:
            if await host.effects.run_due(worker="drainer") == 0:
                await asyncio.sleep(0.05)


async def _refund_once_then_drain(host: Host) -> EffectRecord:
    """A completed refund that stages one effect, after the workers gave up or delivered it."""
    outcome = await host.invoke(
        "bookings.refund",
        {"booking_id": "bk_1", "amount_cents": 5, "_charter": {"requestId": str(uuid.uuid4())}},
        AGENT,
    )
    assert isinstance(outcome, Completed)
    await _drain(host)
    [record] = await host.effects.list()
    return record


async def test_F01_sigkill_after_commit_before_delivery_a_worker_delivers_each_once(
    sql_store: SqlStore,
) -> None:
    request_id = str(uuid.uuid4())
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        "crash",
        str(sql_store.engine.url.render_as_string(hide_password=False)),
        request_id,
        "3",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        assert process.stdout is not None
        line = await process.stdout.readline()
        assert line.decode().strip() == "at after_commit_before_response", line
        process.send_signal(signal.SIGKILL)
        _, err = await process.communicate()
    assert process.returncode == -signal.SIGKILL, err.decode()

    host, provider = await effects_host(sql_store)
    staged = await host.effects.list(request_id=request_id)
    assert len(staged) == 3 and {r.status for r in staged} == {"pending"}
    assert await provider.calls() == {}  # committed, never delivered
    # The dead process's lease holds them for a second; then a worker takes them.
    await _drain(host)
    delivered = await host.effects.list(request_id=request_id)
    assert {r.status for r in delivered} == {"delivered"}
    assert await provider.calls() == {r.key: 1 for r in staged}
    # The client's retry replays the stored outcome and stages nothing more.
    retry = await host.invoke(
        "bookings.refund",
        {
            "booking_id": "bk_1",
            "amount_cents": 500,
            "effects": 3,
            "_charter": {"requestId": request_id},
        },
        AGENT,
    )
    assert isinstance(retry, Completed) and retry.replayed
    assert isinstance(retry.output, dict)
    keys = cast(list[str], retry.output["keys"])  # Refund.keys, as JSON
    assert sorted(keys) == sorted(r.key for r in staged)
    await _drain(host)
    assert await provider.calls() == {r.key: 1 for r in staged}


async def test_F02_four_workers_in_two_processes_deliver_1000_effects_once_each(
    sql_store: SqlStore, store_backend: str
) -> None:
    if store_backend != "postgres":
        pytest.skip("SQLite runs one worker process (docs/effects.md)")
    host, provider = await effects_host(sql_store)
    keys: list[str] = []
    for batch in range(10):
        async with sql_store.transaction(wait=5) as tx:
            for n in range(RACED // 10):
                record = host.effects.record(
                    "payments.refund", {"n": n}, tenant_id="acme", key=("race", str(batch), str(n))
                ).model_copy(update={"lease_until": None, "leased_by": None, "attempts": 0})
                assert await tx.insert_effect(record)
                keys.append(record.key)
    url = sql_store.engine.url.render_as_string(hide_password=False)
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(CHILD),
            "work",
            url,
            "2",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    async with asyncio.timeout(300):
        for process in processes:
            assert process.stdout is not None
            assert (await process.stdout.readline()).decode().strip() == "ready"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            await process.stdin.drain()
        outputs = [await process.communicate() for process in processes]
    attempts: dict[str, int] = {}
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err.decode()
        attempts.update(json.loads(out.decode().strip().splitlines()[-1]))
    assert await provider.calls() == dict.fromkeys(keys, 1)
    assert len(attempts) == 4 and sum(attempts.values()) == RACED
    assert await host.effects.backlog() == (0, None)
    statuses = {r.status for r in await host.effects.list(limit=RACED)}
    assert statuses == {"delivered"}


async def test_F03_a_provider_failing_three_times_is_delivered_after_three_retries(
    sql_store: SqlStore,
) -> None:
    host, provider = await effects_host(sql_store, fail_first=3)
    record = await _refund_once_then_drain(host)
    assert record.status == "delivered" and record.attempts == 4
    assert await provider.calls() == {record.key: 4}
    actions = [e.action for e in await sql_store.events(tenant="acme") if e.note == record.key]
    assert sorted(actions) == ["effect.delivered"] + ["effect.retried"] * 3


async def test_F04_always_failing_is_dead_after_the_limit_then_redriven_with_the_cli(
    sql_store: SqlStore, make_sql_store: SqlStoreFactory
) -> None:
    host, provider = await effects_host(sql_store, fail_first=10**9, max_attempts=3)
    dead = await _refund_once_then_drain(host)
    assert dead.status == "dead" and dead.attempts == 3
    assert await provider.calls() == {dead.key: 3}
    assert await host.effects.run_due(worker="w") == 0  # never claimed again
    # The provider is back; a person re-drives the effect from the command line.
    provider.fail_first = 0
    url = sql_store.engine.url.render_as_string(hide_password=False)
    result = await asyncio.to_thread(
        CliRunner().invoke, app, ["effects", "retry", dead.key, "--db", url]
    )
    assert result.exit_code == 0, result.output
    await _drain(host)
    [redriven] = await host.effects.list()
    assert redriven.status == "delivered"
    assert await provider.calls() == {dead.key: 4}
