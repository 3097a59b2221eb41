"""`charter worker` and `charter effects` on a SQLite store: an effect that always fails is
parked dead after its limit, listed, re-driven with `charter effects retry` and delivered
by the next worker pass; discard; bad input is one clear line."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cli_support import charter, error_line, sqlite, usage_error

from charter import Completed, Principal
from charter.store import SqlStore

TARGET = '''
from collections import Counter
from datetime import timedelta

from pydantic import BaseModel

import charter
from charter import ActionPolicy, Host, Registry, RiskPolicy, tool

CALLS: Counter[str] = Counter()
DELIVERED: Counter[str] = Counter()
FAILING = [True]


class RefundRequest(BaseModel):
    booking_id: str
    amount_cents: int


class Refund(BaseModel):
    booking_id: str


@charter.effect("payments.refund", max_attempts=3, backoff=timedelta(milliseconds=1))
async def refund_at_provider(payload: dict, key: str) -> None:
    CALLS[key] += 1
    if FAILING[0]:
        raise ConnectionError("the payment provider is down")
    DELIVERED[key] += 1


@tool(
    tier="write",
    name="bookings.refund",
    required_scopes=["bookings:refund"],
    risk_policy=RiskPolicy(
        destructive=False, reversible=False, dry_run_supported=False, side_effects=("refund",)
    ),
    action_policy=ActionPolicy(target_type="booking", command_target_field="booking_id"),
)
async def refund(args: RefundRequest, ctx: charter.ToolContext) -> Refund:
    """Refund part of a booking."""
    ctx.effect("payments.refund", args.model_dump())
    return Refund(booking_id=args.booking_id)


def host(store):
    registry = Registry()
    registry.register(refund)
    registry.register_effect(refund_at_provider)
    return Host(registry, store=store)
'''

AGENT = Principal(subject="agent-ada", tenant_id="acme", scopes=frozenset({"bookings:refund"}))


@pytest.fixture
def target(write_target: Callable[[str], str]) -> str:
    return f"{write_target(TARGET)}:host"


def _module(target: str) -> ModuleType:
    import sys

    return sys.modules[target.partition(":")[0]]


async def _call_refund(module: ModuleType, db: str) -> None:
    async with SqlStore(db) as store:
        host = module.host(store)
        outcome = await host.invoke(
            "bookings.refund",
            {
                "booking_id": "bk_1",
                "amount_cents": 500,
                "_charter": {"requestId": str(uuid.uuid4())},
            },
            AGENT,
        )
        assert isinstance(outcome, Completed)


def _effects(db: str, *options: str) -> list[dict[str, Any]]:
    result = charter("effects", "list", "--db", db, "--json", *options)
    assert result.exit_code == 0, result.output
    listed: list[dict[str, Any]] = json.loads(result.stdout)
    return listed


def test_a_dead_effect_is_redriven_with_charter_effects_retry(target: str, tmp_path: Path) -> None:
    db = sqlite(tmp_path / "effects.db")
    # Import the target through the command first, so the test and the worker share it.
    assert charter("tools", target, "--db", db).exit_code == 0
    module = _module(target)
    asyncio.run(_call_refund(module, db))
    [pending] = _effects(db)
    assert pending["status"] == "pending" and pending["attempts"] == 1
    while _effects(db)[0]["status"] == "pending":
        result = charter("worker", target, "--db", db, "--once")
        assert result.exit_code == 0, result.output
    [dead] = _effects(db, "--status", "dead")
    key = dead["key"]
    assert dead["attempts"] == 3 and "ConnectionError" in dead["last_error"]
    assert module.CALLS[key] == 3
    shown = charter("effects", "show", key, "--db", db)
    assert shown.exit_code == 0 and json.loads(shown.stdout)["key"] == key

    module.FAILING[0] = False
    result = charter("effects", "retry", key, "--db", db)
    assert result.exit_code == 0 and "pending again" in result.stdout
    result = charter("worker", target, "--db", db, "--once")
    assert result.exit_code == 0, result.output
    [delivered] = _effects(db)
    assert delivered["status"] == "delivered"
    assert module.DELIVERED == {key: 1}
    # Nothing left to re-drive or discard.
    assert charter("effects", "retry", key, "--db", db).exit_code == 1
    assert charter("effects", "discard", key, "--db", db).exit_code == 1


def test_discard_parks_a_pending_effect_for_good(target: str, tmp_path: Path) -> None:
    db = sqlite(tmp_path / "effects.db")
    assert charter("tools", target, "--db", db).exit_code == 0
    module = _module(target)
    asyncio.run(_call_refund(module, db))
    [pending] = _effects(db, "--tenant", "acme")
    result = charter("effects", "discard", pending["key"], "--db", db)
    assert result.exit_code == 0, result.output
    assert charter("worker", target, "--db", db, "--once").exit_code == 0
    assert _effects(db)[0]["status"] == "discarded"
    assert _effects(db, "--tenant", "globex") == []


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    db = sqlite(tmp_path / "effects.db")
    assert charter("db", "upgrade", "--db", db).exit_code == 0
    result = charter("effects", "list", "--db", db, "--status", "lost")
    assert "--status must be one of" in usage_error(result)
    result = charter("effects", "show", "eff_nope", "--db", db)
    assert "no effect 'eff_nope'" in usage_error(result)


def test_a_discard_is_audited_and_db_prune_deletes_finished_effects(
    target: str, tmp_path: Path
) -> None:
    db = sqlite(tmp_path / "effects.db")
    assert charter("tools", target, "--db", db).exit_code == 0
    asyncio.run(_call_refund(_module(target), db))
    [pending] = _effects(db)
    assert charter("effects", "discard", pending["key"], "--db", db).exit_code == 0

    async def audited() -> list[tuple[str, str | None, str | None]]:
        async with SqlStore(db) as store:
            return [(e.action, e.subject, e.note) for e in await store.events(tenant="acme")]

    assert ("effect.discard", None, pending["key"]) in asyncio.run(audited())
    kept = charter("db", "prune", "--db", db, "--json")
    assert kept.exit_code == 0 and json.loads(kept.stdout)["effectsDeleted"] == 0
    assert _effects(db)[0]["status"] == "discarded"
    pruned = charter("db", "prune", "--db", db, "--effect-days", "0")
    assert pruned.exit_code == 0 and "1 finished effects" in pruned.stdout
    assert _effects(db) == []


def test_retrying_an_unknown_effect_says_so(tmp_path: Path) -> None:
    db = sqlite(tmp_path / "effects.db")
    assert charter("db", "upgrade", "--db", db).exit_code == 0
    result = charter("effects", "retry", "eff_nope", "--db", db)
    assert result.exit_code == 1
    assert error_line(result) == "error: No effect 'eff_nope' in the outbox."
