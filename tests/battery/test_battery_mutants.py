"""L19, mutation tests have teeth (reliability.md §5.1): the battery's checks fail on
deliberately broken variants of charter.

Each variant is built here, in test code, by subclassing or wrapping charter's public
classes (no switch in the library): a claim that checks and then acts, SQLite write
transactions that begin deferred, a ledger key without the tenant, an approval check that
ignores the arguments, and tenant pinning that lets the admin scope through. Each test
runs an existing battery check against its variant and asserts that the check FAILS, then
asserts the failure is the variant's defect (two effects, ``database is locked``, a
refund of the wrong amount, a write to another tenant), not an accident of the harness.
The checks pass on charter itself: they are the battery's own tests, run there too.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa
import test_battery_approvals as approvals_battery
import test_battery_ledger_races as ledger_races
from battery_support import (
    ADMIN,
    ALICE,
    APPROVER,
    EFFECTS,
    GLOBEX_APPROVER,
    LEDGER,
    SCOPES,
    Clock,
    Env,
    EnvFactory,
    Observer,
    approval_id_of,
    battery_host,
    completed,
    failure,
    refund,
    rid,
    widget,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine
from tests.host import test_host_tenancy as tenancy_checks
from tests.store import test_sql_concurrency as store_checks

import charter.auth
import charter.host._tenancy
from charter import ErrorCode, Failed, Principal
from charter.auth import TenantDecision
from charter.errors import StoreBusy
from charter.host import Host
from charter.ledger import LedgerEntry
from charter.store import SqlStore
from charter.store._schema import ledger_entries
from charter.store._transaction import SqlTransaction

pytestmark = pytest.mark.anyio

_KEY = ("tenant_id", "principal_id", "request_id")


# -- the variants -------------------------------------------------------------------------------


class _Wrapped:
    """A ``LedgerTransaction`` that passes everything to charter's own but what it overrides."""

    def __init__(self, tx: SqlTransaction) -> None:
        self._tx = tx

    @property
    def connection(self) -> Any:
        return self._tx.connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)


class _CheckThenActTransaction(_Wrapped):
    async def claim(self, entry: LedgerEntry, now: datetime) -> LedgerEntry | None:
        conn = self._tx.connection
        c = ledger_entries.c
        key = sa.and_(*(c[k] == getattr(entry, k) for k in _KEY))
        row = (await conn.execute(sa.select(ledger_entries).where(key))).first()
        if row is not None:
            return LedgerEntry.model_validate(dict(row._mapping))
        # The defect: no unique arbiter. A concurrent claim that also saw nothing is
        # overwritten by this upsert instead of being found.
        values = entry.model_dump()
        insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
        await conn.execute(
            insert(ledger_entries)
            .values(**values)
            .on_conflict_do_update(
                index_elements=list(_KEY), set_={k: v for k, v in values.items() if k not in _KEY}
            )
        )
        return None


class CheckThenActStore(SqlStore):
    """The claim reads the key, and inserts when it saw nothing (no ON CONFLICT arbiter)."""

    @asynccontextmanager
    async def transaction(self, *, wait: float) -> AsyncIterator[Any]:
        async with super().transaction(wait=wait) as tx:
            yield _CheckThenActTransaction(tx)


_ANY_TENANT = "*"


class _NoTenantTransaction(_Wrapped):
    async def claim(self, entry: LedgerEntry, now: datetime) -> LedgerEntry | None:
        return await self._tx.claim(entry.model_copy(update={"tenant_id": _ANY_TENANT}), now)

    async def complete(self, entry: LedgerEntry) -> None:
        await self._tx.complete(entry.model_copy(update={"tenant_id": _ANY_TENANT}))


class KeyWithoutTenantStore(SqlStore):
    """The ledger key is (principal, request id): every tenant shares one key space."""

    async def get_entry(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> LedgerEntry | None:
        return await super().get_entry(_ANY_TENANT, principal_id, request_id)

    @asynccontextmanager
    async def transaction(self, *, wait: float) -> AsyncIterator[Any]:
        async with super().transaction(wait=wait) as tx:
            yield _NoTenantTransaction(tx)


class DeferredSqliteStore(SqlStore):
    """SQLite write transactions begin with a plain (deferred) ``BEGIN``.

    The same engine charter configures (WAL, busy timeout, no implicit BEGIN from the
    driver), plus one more ``begin`` hook that turns charter's ``BEGIN IMMEDIATE`` into a
    ``BEGIN``: the write lock is then taken at the first write, not up front.
    """

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        _make_begins_deferred(self.engine)


def _make_begins_deferred(engine: AsyncEngine) -> None:
    @sa.event.listens_for(engine.sync_engine, "before_cursor_execute", retval=True)
    def _deferred(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> tuple[str, Any]:
        if statement.strip().upper() == "BEGIN IMMEDIATE":
            statement = "BEGIN"  # the defect: no write lock until the first write
        return statement, parameters


def approvals_not_bound_to_arguments(host: Host) -> None:
    """Wrap ``host.approvals.check`` so an approval fits any arguments (same tool, target)."""
    approvals = host.approvals
    check = approvals.check

    async def unbound(approval_id: str, *, fingerprint: str, **facts: Any) -> Any:
        record = await approvals.store.get_approval(approval_id)
        if record is not None:
            fingerprint = record.fingerprint  # the defect: whatever the call's arguments
        return await check(approval_id, fingerprint=fingerprint, **facts)

    approvals.check = unbound  # type: ignore[method-assign]


@pytest.fixture
def admin_unpinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's tenancy step treats every tool as delegable for the admin scope."""
    original = charter.auth.resolve_tenant

    def resolve(
        *, principal: Principal, requested: object, delegable: bool, admin_scope: str | None
    ) -> TenantDecision:
        unpinned = delegable or admin_scope in principal.scopes  # the defect
        return original(
            principal=principal, requested=requested, delegable=unpinned, admin_scope=admin_scope
        )

    monkeypatch.setattr(charter.host._tenancy, "resolve_tenant", resolve)


# -- building environments on a variant -------------------------------------------------------

VariantFactory = Callable[..., Awaitable[Env]]


@pytest.fixture
async def make_variant_env(store_url: str) -> AsyncIterator[VariantFactory]:
    """``make(store_class, host_hook=None, **options)``: an ``Env`` like ``make_env``'s."""
    opened: list[SqlStore] = []

    async def make(
        store_class: type[SqlStore] = SqlStore,
        host_hook: Callable[[Host], None] | None = None,
        *,
        pool_size: int = 10,
        **options: Any,
    ) -> Env:
        store = store_class(store_url, pool_size=pool_size)
        opened.append(store)
        await store.open()
        clock = options.pop("clock", None) or Clock()
        battery, host = await battery_host(store, clock=clock, **options)
        if host_hook is not None:
            host_hook(host)
        return Env(store=store, battery=battery, host=host, clock=clock)

    try:
        yield make
    finally:
        for store in opened:
            await store.aclose()


async def fails(check: Awaitable[object]) -> BaseException:
    """Run a battery check that must fail on a variant; return how it failed."""
    try:
        await check
    except (AssertionError, ValueError, StoreBusy, sa.exc.DBAPIError, BaseExceptionGroup) as exc:
        return exc
    raise AssertionError("the battery check passed on a deliberately broken variant")


def flattened(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in flattened(inner)]
    return [error]


# -- checks the battery did not have yet --------------------------------------------------------

ALICE_OF_GLOBEX = Principal(subject="alice", tenant_id="globex", scopes=SCOPES)
"""Another tenant's user with the same subject: subjects are unique per tenant only."""


async def check_same_subject_in_two_tenants(make_env: EnvFactory, observer: Observer) -> None:
    """L07 with one subject in two tenants, and one admin acting for two tenants.

    Principals are stored with their home tenant, so two tenants' ``alice`` never share
    a key; what only the ledger key's tenant keeps apart is one admin's request id used
    for its own tenant and, delegated, for another.
    """
    env = await make_env()
    request_id = rid()
    acme = completed(await env.host.invoke("create_widget", widget("w", request_id), ALICE))
    globex = completed(
        await env.host.invoke("create_widget", widget("w", request_id), ALICE_OF_GLOBEX)
    )
    assert not globex.replayed and globex.output != acme.output
    assert await observer.count(EFFECTS, request_id=request_id) == 2
    assert await observer.count(LEDGER, request_id=request_id) == 2

    delegated = rid()
    admin = Principal(subject="root", tenant_id="acme", scopes=SCOPES | {"admin"})
    for tenant, approver in (("globex", GLOBEX_APPROVER), ("acme", APPROVER)):
        arguments = refund("o-9", 1, delegated, onBehalfOf=tenant)
        approval_id = approval_id_of(await env.host.invoke("refund_order", arguments, admin))
        assert not isinstance(await env.host.approvals.grant(approval_id, approver), Failed)
        done = refund("o-9", 1, delegated, onBehalfOf=tenant, approval_id=approval_id)
        assert not completed(await env.host.invoke("refund_order", done, admin)).replayed
    assert await observer.count(LEDGER, request_id=delegated) == 2


async def check_admin_pinned_on_sql(make_env: EnvFactory, observer: Observer) -> None:
    """T01 on a SQL store: the admin scope does not unpin a tool that is not delegable."""
    env = await make_env()
    request_id = rid()
    arguments = widget("theirs", request_id, _controls={"onBehalfOf": "globex"})
    failure(
        await env.host.invoke("create_widget", arguments, ADMIN),
        ErrorCode.AUTHORIZATION_DENIED,
        "tenant_forbidden",
    )
    assert await observer.count(EFFECTS, request_id=request_id) == 0
    assert await observer.count(LEDGER, request_id=request_id) == 0


async def test_L19_the_added_checks_pass_on_charter_itself(
    make_env: EnvFactory, observer: Observer
) -> None:
    await check_same_subject_in_two_tenants(make_env, observer)
    await check_admin_pinned_on_sql(make_env, observer)


# -- each variant is caught -------------------------------------------------------------------


@pytest.mark.slow
async def test_L19_check_then_act_is_caught_by_L01(
    make_variant_env: VariantFactory,
    observer: Observer,
    store_backend: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if store_backend == "sqlite":
        pytest.skip(
            "on SQLite, BEGIN IMMEDIATE serialises every writer before its claim reads, so a "
            "check-then-act claim cannot race; the variant is caught on PostgreSQL"
        )

    async def make_env(*, pool_size: int = 10, **options: Any) -> Env:
        # At most 16 connections instead of L01's 66: a broken variant need not hold most
        # of the server's max_connections to show its defect (16 callers still race).
        return await make_variant_env(CheckThenActStore, pool_size=min(pool_size, 16), **options)

    await fails(
        ledger_races.test_L01_concurrent_same_key_single_execution(make_env, observer, caplog)
    )
    # The defect: callers that all saw "no row" all ran the handler.
    assert await observer.count(EFFECTS) > 1


async def test_L19_deferred_sqlite_transactions_are_caught_by_the_read_then_write_check(
    store_url: str, store_backend: str
) -> None:
    if store_backend == "postgres":
        pytest.skip("deferred and immediate transactions are SQLite's; PostgreSQL locks rows")
    opened: list[SqlStore] = []

    async def make(**options: Any) -> SqlStore:
        store = DeferredSqliteStore(store_url, **options)
        opened.append(store)
        await store.open()
        return store

    try:
        error = await fails(
            store_checks.test_concurrent_read_then_write_transactions_serialize_without_database_is_locked(
                make, "sqlite"
            )
        )
        # The defect: a transaction that read first cannot upgrade to the write lock and
        # fails at once ("database is locked"), without waiting out the busy timeout.
        assert any("database is locked" in str(leaf) for leaf in flattened(error)), error
        error = await fails(
            store_checks.test_every_sqlite_write_transaction_begins_immediate(await make())
        )
        assert "BEGIN" in str(error)
    finally:
        for store in opened:
            await store.aclose()


async def test_L19_a_key_without_the_tenant_is_caught_by_L07(
    make_variant_env: VariantFactory, observer: Observer
) -> None:
    make_env = functools.partial(make_variant_env, KeyWithoutTenantStore)
    await fails(check_same_subject_in_two_tenants(make_env, observer))
    # The defect: the admin's call for its own tenant met its delegated call's row. (It
    # cannot read the stored result: the fingerprint covers the tenant, so it gets a
    # conflict instead.)
    assert await observer.count(LEDGER) == 3


async def test_L19_an_approval_not_bound_to_the_arguments_is_caught_by_A04(
    make_variant_env: VariantFactory, observer: Observer
) -> None:
    make_env = functools.partial(make_variant_env, SqlStore, approvals_not_bound_to_arguments)
    await fails(approvals_battery.test_A04_approval_reuse_other_command(make_env, observer))
    # The defect: the approval for 100 paid out 101.
    assert await observer.count(EFFECTS, detail="o-1:101") == 1


async def test_L19_admin_bypassing_pinning_is_caught_by_T01(
    admin_unpinned: None, make_env: EnvFactory, observer: Observer
) -> None:
    # The host battery's T01 (in-memory store) and the same check on SQL.
    await fails(
        tenancy_checks.test_an_admin_is_still_pinned_on_a_non_delegable_tool_with_no_effect_and_no_row()
    )
    await fails(check_admin_pinned_on_sql(make_env, observer))
    # The defect: the admin wrote into another tenant through a tool that is not delegable.
    assert await observer.count(EFFECTS, tenant_id="globex") == 1
