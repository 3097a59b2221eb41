"""Many replicas on one PostgreSQL (DESIGN §6): two ``charter serve`` processes on different
ports share one database; clients alternate between them, retrying with the same request
ids, for a bounded time. Nothing is lost and nothing happens twice, and an approval granted
through one replica is consumed through the other.

Needs PostgreSQL (skips without it; fails under ``CI=true``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from _transports import AGENT, APPROVER, ROOT, prepare_travel, scalar
from tests.store.conftest import postgres_schema, require_postgres

from live_server import Served, charter_serve

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CLIENTS = 8
LOAD_SECONDS = 10.0
"""How long the clients keep starting new actions (each then runs to its answer)."""
ANSWER_SECONDS = 120.0


@contextmanager
def replica(db_url: str, keys_file: Path, directory: Path) -> Iterator[Served]:
    """``charter serve examples.travel:host --stateless`` from ``directory``, until the block
    ends; its log must hold no traceback."""
    env = {
        "CHARTER_DEMO_KEYS": str(keys_file),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    args = ("examples.travel:host", "--db", db_url, "--stateless")
    with charter_serve(*args, cwd=directory, env=env) as served:
        yield served
    log = served.read_log()
    assert "Traceback" not in log, log


@dataclass
class Done:
    """A request's definitive answer."""

    name: str
    request_id: str
    trip_id: str
    attempts: int
    replicas: frozenset[int]


class Clients:
    """Threads that create trips through both replicas, alternating on every attempt."""

    def __init__(self, replicas: list[Served], key: str) -> None:
        self.replicas = replicas
        self.key = key
        self.local = threading.local()
        self.counter = itertools.count()
        self.lock = threading.Lock()
        self.refused: list[str] = []

    def clients(self) -> list[httpx.Client]:
        clients: list[httpx.Client] | None = getattr(self.local, "clients", None)
        if clients is None:
            clients = [
                httpx.Client(
                    base_url=r.url, timeout=30, headers={"Authorization": f"Bearer {self.key}"}
                )
                for r in self.replicas
            ]
            self.local.clients = clients
        return clients

    def run(self, stop_at: float) -> list[Done]:
        done: list[Done] = []
        try:
            while time.monotonic() < stop_at:
                done.append(self.one(next(self.counter)))
        finally:
            for client in self.clients():
                client.close()
        return done

    def one(self, index: int) -> Done:
        """One action: sent to one replica, retried on the other, duplicated on purpose."""
        name = f"replicas-{index}"
        request_id = str(uuid.uuid4())
        body: dict[str, Any] = {
            "name": name,
            "destination": "Lima",
            "nights": 1,
            "_charter": {"requestId": request_id},
        }
        clients = self.clients()
        used: set[int] = set()
        deadline = time.monotonic() + ANSWER_SECONDS
        if index % 5 == 0:
            # Both replicas at once: they race on one key in the shared database.
            used.update((0, 1))
            with ThreadPoolExecutor(2) as both:
                answers = list(
                    both.map(lambda side: self.quiet_post(clients[side], body, name), (0, 1))
                )
            assert 200 in answers or None in answers, f"{name}: {answers}"
        for attempt in itertools.count(1):
            assert time.monotonic() < deadline, f"{name} got no answer"
            side = (index + attempt) % 2
            used.add(side)
            try:
                response = clients[side].post("/v1/tools/trips.create:call", json=body)
            except httpx.TransportError as exc:
                self.note(f"{name}: {type(exc).__name__}")
                continue
            if response.status_code == 200 and (attempt > 1 or index % 3):
                return Done(
                    name=name,
                    request_id=request_id,
                    trip_id=response.json()["output"]["id"],
                    attempts=attempt,
                    replicas=frozenset(used),
                )
            if response.status_code != 200:
                assert response.status_code in (409, 503), response.text
                self.note(f"{name}: {response.status_code}")
            # Every third action is sent again even when answered (a client that lost the
            # answer), so it reaches the other replica as an exact retry.
        raise AssertionError("unreachable")

    def quiet_post(self, client: httpx.Client, body: dict[str, Any], name: str) -> int | None:
        """POST and return the status (None when the connection failed)."""
        try:
            status = client.post("/v1/tools/trips.create:call", json=body).status_code
        except httpx.TransportError:
            return None
        if status != 200:
            assert status in (409, 503), status
            self.note(f"{name}: {status}")
        return status

    def note(self, refusal: str) -> None:
        with self.lock:
            self.refused.append(refusal)


@pytest.mark.timeout(400)
def test_replicas_lose_nothing_and_run_nothing_twice(tmp_path: Path) -> None:
    require_postgres()
    with postgres_schema() as url, ExitStack() as stack:
        keys_file = tmp_path / "keys.json"
        keys = asyncio.run(prepare_travel(url, keys_file))
        replicas = [stack.enter_context(replica(url, keys_file, tmp_path)) for _ in range(2)]
        clients = Clients(replicas, keys[AGENT])
        stop_at = time.monotonic() + LOAD_SECONDS
        with ThreadPoolExecutor(CLIENTS) as pool:
            runs = [pool.submit(clients.run, stop_at) for _ in range(CLIENTS)]
            answers = [done for run in runs for done in run.result()]
        approval = approve_across(replicas, keys)
        trips = asyncio.run(
            scalar(url, "SELECT count(*) FROM travel_trips WHERE name LIKE 'replicas-%'")
        )
        names = asyncio.run(
            scalar(
                url,
                "SELECT count(DISTINCT name) FROM travel_trips WHERE name LIKE 'replicas-%'",
            )
        )
        ledger = asyncio.run(
            scalar(url, "SELECT count(*) FROM charter_ledger_entries WHERE tool = 'trips.create'")
        )
        claims = asyncio.run(scalar(url, "SELECT count(*) FROM charter_claims"))
        stored = {
            done.name: asyncio.run(
                scalar(url, "SELECT id FROM travel_trips WHERE name = :n", n=done.name)
            )
            for done in answers[:50]
        }
        consumed = asyncio.run(
            scalar(url, "SELECT status FROM charter_approvals WHERE id = :a", a=approval)
        )
        payments = asyncio.run(scalar(url, "SELECT count(*) FROM travel_payment_calls"))
    assert len(answers) >= CLIENTS, "the load made too few actions to mean anything"
    # Both replicas served the actions, exact retries included.
    assert any(len(done.replicas) == 2 for done in answers)
    # Zero lost: every action answered has its trip, the one it was told.
    for done in answers[:50]:
        assert stored[done.name] == done.trip_id, done
    # Zero duplicated: one trip, one ledger row and one claim per action.
    assert (trips, names, ledger, claims) == (len(answers),) * 4
    assert consumed == "consumed" and payments == 1
    retried = sum(done.attempts > 1 for done in answers)
    print(f"replicas: {len(answers)} actions, {retried} retried, {len(clients.refused)} refusals")


def approve_across(replicas: list[Served], keys: dict[str, str]) -> str:
    """Ask on replica 0, grant on replica 1, run on replica 0, replay on replica 1."""
    a, b = replicas
    request_id = str(uuid.uuid4())
    body: dict[str, Any] = {
        "booking_id": "bkg_flight01",
        "amount_cents": 2500,
        "_charter": {"requestId": request_id, "confirmed": True},
    }

    def post(side: Served, path: str, role: str, payload: object = None) -> httpx.Response:
        return httpx.post(
            side.url + path,
            json=payload,
            headers={"Authorization": f"Bearer {keys[role]}"},
            timeout=30,
        )

    asked = post(a, "/v1/tools/bookings.refund:call", AGENT, body)
    assert asked.status_code == 202, asked.text
    approval_id: str = asked.json()["approvalId"]
    granted = post(b, f"/v1/approvals/{approval_id}:grant", APPROVER)
    assert granted.status_code == 200, granted.text
    body["_charter"]["approvalId"] = approval_id
    ran = post(a, "/v1/tools/bookings.refund:call", AGENT, body)
    assert ran.status_code == 200 and ran.json()["replayed"] is False, ran.text
    again = post(b, "/v1/tools/bookings.refund:call", AGENT, body)
    assert again.status_code == 200 and again.json()["replayed"] is True, again.text
    assert again.json()["output"] == ran.json()["output"]
    assert ran.json()["output"]["refunded_cents"] == 2500
    return approval_id
