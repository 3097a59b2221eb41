"""Listing approvals: by requester before the limit, expiry read at list time, keyset pages.

Each test runs on ``MemoryStore`` and on ``SqlStore`` (SQLite and PostgreSQL), through the
service (``Approvals.list``) an approver, a requester and the REST route go through.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from tests.store.conftest import SQL_BACKENDS, fresh_database, require_postgres

from charter.auth import Principal
from charter.ledger import ApprovalRecord, Approvals, LedgerStore, MemoryStore
from charter.registry import Registry
from charter.store import SqlStore
from charter.testing._records import HOUR, NOW, approval

pytestmark = pytest.mark.anyio

APPROVER = Principal(
    subject="ana", tenant_id="acme", scopes=frozenset({"charter:approve"}), kind="person"
)
AGENT = Principal(subject="bot", tenant_id="acme", scopes=frozenset(), kind="agent")
SPAMMER = "acme/spam"


@pytest.fixture(params=["memory", *SQL_BACKENDS])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LedgerStore]:
    backend: str = request.param
    if backend == "memory":
        yield MemoryStore()
        return
    if backend == "postgres":
        require_postgres()
    with fresh_database(backend, tmp_path / "charter.db") as url:
        async with SqlStore(url) as sql:
            yield sql


def _approvals(store: LedgerStore, at: list[datetime]) -> Approvals:
    """The service over ``store``, its clock reading ``at[0]`` (moved by the test)."""
    return Approvals(
        store,
        registry=Registry(),
        approver_scope="charter:approve",
        admin_scope="admin",
        allow_self_approval=False,
        clock=lambda: at[0],
    )


def _ids(records: list[ApprovalRecord]) -> list[str]:
    return [record.id for record in records]


async def test_a_requester_sees_its_own_approvals_whatever_fills_the_newest_page(
    store: LedgerStore,
) -> None:
    await store.insert_approval(
        approval("apr-mine", requester_id=AGENT.key, created_at=NOW - 2 * HOUR)
    )
    for i in range(30):
        await store.insert_approval(
            approval(f"apr-spam-{i:02d}", requester_id=SPAMMER, created_at=NOW - HOUR)
        )
    service = _approvals(store, [NOW - HOUR])
    # Filtered after the limit, the 30 newer ones filled the page and the agent saw none.
    assert _ids(await service.list(AGENT, "pending", 10)) == ["apr-mine"]
    assert len(await service.list(APPROVER, "pending", 10)) == 10


async def test_an_approval_past_its_expiry_is_listed_as_expired_not_pending(
    store: LedgerStore,
) -> None:
    for name, expires in (("apr-live", NOW + HOUR), ("apr-late", NOW - timedelta(seconds=1))):
        await store.insert_approval(approval(name, requester_id=SPAMMER, expires_at=expires))
    await store.insert_approval(
        approval("apr-granted-late", requester_id=SPAMMER, expires_at=NOW - HOUR)
    )
    await store.decide_approval(
        "apr-granted-late",
        expected=("pending",),
        status="approved",
        decided_by="acme/ana",
        reason=None,
        at=NOW - 2 * HOUR,
        history=(),
    )
    service = _approvals(store, [NOW])
    assert _ids(await service.list(APPROVER, "pending")) == ["apr-live"]
    assert _ids(await service.list(APPROVER, "approved")) == []
    assert sorted(_ids(await service.list(APPROVER, "expired"))) == [
        "apr-granted-late",
        "apr-late",
    ]
    every = {r.id: r.status_at(NOW) for r in await service.list(APPROVER, None)}
    assert every == {"apr-live": "pending", "apr-late": "expired", "apr-granted-late": "expired"}


async def test_pages_walk_every_approval_once_newest_first_even_with_equal_times(
    store: LedgerStore,
) -> None:
    # Half share one created_at: the id breaks the tie, so no page skips or repeats one.
    for i in range(25):
        created = NOW - HOUR if i % 2 else NOW - HOUR - timedelta(minutes=i)
        await store.insert_approval(approval(f"apr-{i:02d}", created_at=created))
    service = _approvals(store, [NOW - 2 * HOUR])
    walked: list[str] = []
    before = None
    while True:
        page = await service.list(APPROVER, "pending", 7, before=before)
        walked += _ids(page)
        if len(page) < 7:
            break
        before = page[-1].cursor
    everything = await service.list(APPROVER, "pending", 100)
    assert walked == _ids(everything) and len(walked) == 25
    assert await service.list(APPROVER, "pending", 7, before=everything[-1].cursor) == []
