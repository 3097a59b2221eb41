"""Test support for the travel example: its demo principals and a host on a real SqlStore."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from charter import Host, Principal
from charter.store import SqlStore, sqlite_url

# examples/ is not installed: `python -m pytest` (make test) has the repo root on sys.path,
# a bare `pytest` does not.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.travel import DEMO_PRINCIPALS, build_host  # noqa: E402
from examples.travel.db import PaymentProvider  # noqa: E402


def demo_principal(role: str) -> Principal:
    """The principal a demo API key of ``role`` authenticates as."""
    spec = next(s for s in DEMO_PRINCIPALS if s["role"] == role)
    return Principal(
        subject=spec["subject"],
        tenant_id=spec["tenant_id"],
        scopes=frozenset(spec["scopes"]),
        kind=spec["kind"],
    )


AGENT = demo_principal("traveller-agent")
APPROVER = demo_principal("staff-approver")
ADMIN = demo_principal("admin")
GLOBEX_AGENT = demo_principal("globex-agent")


@dataclass
class Travel:
    """The travel host on an open store, and the fake payment provider's ledger."""

    host: Host
    store: SqlStore
    payments: PaymentProvider


@asynccontextmanager
async def open_travel(path: Path) -> AsyncIterator[Travel]:
    """The travel host on a fresh SQLite file at ``path``."""
    async with SqlStore(sqlite_url(path)) as store:
        host = await build_host(store)
        try:
            yield Travel(host=host, store=store, payments=PaymentProvider(store.engine))
        finally:
            host.registry.close()
