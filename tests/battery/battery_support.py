"""The battery's application: real ledgered tools whose handlers write effect rows.

Imported by the battery's tests and by ``crash_child.py`` (which runs by path, so this
module sits beside it; the child puts the repository root on ``sys.path`` for
``tests.builders``). Every handler that changes something inserts one row into
``battery_effects`` through ``ctx.db``, the call's own transaction: the number of effects
of a request is the number of rows it left, never a counter in memory that a crash or a
rollback would not undo. ``Battery.runs`` counts handler executions, rolled back or not.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from tests.builders import DESTRUCTIVE_RISK, HiddenPayout, tiered_tool

from charter import ActionPolicy, Principal, Registry, ToolContext
from charter.errors import ErrorCode, ToolError
from charter.host import Host
from charter.outcome import Completed, Denied, Failed, InteractionRequired, ToolOutcome
from charter.store import SqlStore

if TYPE_CHECKING:
    import pytest

EFFECTS = "battery_effects"
LEDGER = "charter_ledger_entries"
APPROVALS = "charter_approvals"

metadata = sa.MetaData()
effects = sa.Table(
    EFFECTS,
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("tenant_id", sa.Text, nullable=False),
    sa.Column("request_id", sa.Text, nullable=True),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
)

SCOPES = frozenset(
    {"widgets:write", "widgets:read", "orders:refund", "orders:ship", "payouts:send"}
)

ALICE = Principal(subject="alice", tenant_id="acme", scopes=SCOPES)
AMY = Principal(subject="amy", tenant_id="acme", scopes=SCOPES)
"""Alice's colleague: same tenant, another principal."""
BORIS = Principal(subject="boris", tenant_id="globex", scopes=SCOPES)
"""Another tenant's caller with the same scopes."""
APPROVER = Principal(subject="ada", tenant_id="acme", scopes=frozenset({"charter:approve"}))
GLOBEX_APPROVER = Principal(
    subject="gus", tenant_id="globex", scopes=frozenset({"charter:approve"})
)
ADMIN = Principal(subject="root", tenant_id="acme", scopes=frozenset({"admin"}))
"""Acme's administrator: the admin scope satisfies scope checks and may delegate."""
GLOBEX_ADMIN = Principal(subject="groot", tenant_id="globex", scopes=frozenset({"admin"}))

EPOCH = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

Failure = Literal["tool_error", "exception", "bad_output"]


class NewWidget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    size: int = 1


class Widget(BaseModel):
    widget_id: str
    name: str
    size: int


class Refund(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: str
    amount: int


class RefundDone(BaseModel):
    refund_id: str
    order_id: str
    amount: int


class Shipment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: str


class Shipped(BaseModel):
    shipment_id: str
    order_id: str


class Payout(HiddenPayout):
    """A payout of an order, with the values a dump hides (``tests.builders.HiddenPayout``)."""

    model_config = ConfigDict(extra="forbid")

    order_id: str


class PayoutSent(BaseModel):
    payout_id: str
    order_id: str
    amount: int


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None


class Count(BaseModel):
    widgets: int


class SimulatedCrash(BaseException):
    """The process "dies" at a fault point: nothing after it runs, and the open
    transaction is rolled back, as the database does for a dead client.

    A ``BaseException``, so no layer turns it into an outcome. The real thing, a killed
    child process, is what ``test_battery_crash.py`` does; this is for in-process tests
    that need many crashes (the L18 state machine) or one next to other checks.
    """


def crash_at(point: str) -> Callable[[str], None]:
    """A fault hook that raises ``SimulatedCrash`` at ``point``."""

    def hook(reached: str) -> None:
        if reached == point:
            raise SimulatedCrash(point)

    return hook


class Clock:
    """A hand-moved UTC clock for the host (never sleep for a TTL)."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@dataclass
class Hold:
    """Keeps every handler that reaches it inside its transaction until ``release``."""

    release: asyncio.Event
    reached: asyncio.Event


def _order_policy(**gates: Any) -> ActionPolicy:
    """An action policy whose target is the order named by the command's ``order_id``."""
    return ActionPolicy(target_type="order", command_target_field="order_id", **gates)


class Battery:
    """The registry of the battery's tools and the knobs the tests turn."""

    def __init__(self) -> None:
        self.runs = 0
        """Handler executions, including those whose transaction rolled back."""
        self.fail: Failure | None = None
        """Make the next handler fail after it wrote its effect row."""
        self.hold: Hold | None = None
        """Keep handlers inside their transaction (after writing) until released."""
        self.after_write: Callable[[ToolContext], Awaitable[None]] | None = None
        """Extra work a handler does in its transaction after writing (tests only)."""
        self.registry = Registry()
        add = self._add
        for name, what in (
            ("create_widget", "Create a widget; the handler makes its id (a created target)."),
            ("rename_widget", "Another write tool with the same input, for cross-tool replays."),
        ):
            add(name, what, NewWidget, Widget, self.create_widget, "write", "widgets:write")
        add(
            "list_widgets",
            "Count widgets (a read: no ledger, no request id).",
            Query,
            Count,
            self.list_widgets,
            "read",
            "widgets:read",
        )
        for name in ("refund_order", "void_order"):
            add(
                name,
                "Refund an order (destructive: confirmation and approval).",
                Refund,
                RefundDone,
                self.refund_order,
                "destructive",
                "orders:refund",
                delegable=True,
                action_policy=_order_policy(approval="required", confirmation="required"),
            )
        add(
            "ship_order",
            "Ship an order (sensitive: needs confirmed: true, no approval).",
            Shipment,
            Shipped,
            self.ship_order,
            "sensitive",
            "orders:ship",
            action_policy=_order_policy(confirmation="required"),
        )
        add(
            "send_payout",
            "Send a payout (write: ledgered, no approval).",
            Payout,
            PayoutSent,
            self.send_payout,
            "write",
            "payouts:send",
            action_policy=_order_policy(),
        )
        add(
            "approved_payout",
            "Send a payout once a person approved it (destructive).",
            Payout,
            PayoutSent,
            self.send_payout,
            "destructive",
            "payouts:send",
            action_policy=_order_policy(approval="required", confirmation="required"),
        )

    def _add(
        self,
        name: str,
        description: str,
        input_schema: type[BaseModel],
        output_schema: type[BaseModel],
        handler: Callable[..., Any],
        tier: Literal["read", "write", "sensitive", "destructive"],
        scope: str,
        **options: Any,
    ) -> None:
        """Register one tool; its risk policy follows its tier (none for a read)."""
        if tier == "destructive":
            options["risk_policy"] = DESTRUCTIVE_RISK
        options.update(description=description, required_scopes=[scope])
        self.registry.register(
            tiered_tool(name, tier, handler, input_schema, output_schema, **options)
        )

    async def _effect(self, ctx: ToolContext, tool: str, detail: str) -> str:
        self.runs += 1
        effect_id = f"{tool}_{uuid.uuid4().hex}"
        await ctx.db.execute(
            sa.insert(effects).values(
                id=effect_id,
                tenant_id=ctx.tenant_id,
                request_id=ctx.request_id,
                tool=tool,
                detail=detail,
            )
        )
        if self.after_write is not None:
            await self.after_write(ctx)
        if self.hold is not None:
            self.hold.reached.set()
            await self.hold.release.wait()
        failure, self.fail = self.fail, None
        if failure == "tool_error":
            raise ToolError(ErrorCode.PROVIDER_UNAVAILABLE, "The widget service is down.")
        if failure == "exception":
            raise RuntimeError("a bug in the handler, after it wrote")
        return effect_id

    async def create_widget(self, command: NewWidget, ctx: ToolContext) -> Widget:
        failure = self.fail
        widget_id = await self._effect(ctx, "create_widget", command.name)
        if failure == "bad_output":
            return {"widget_id": widget_id, "name": command.name}  # type: ignore[return-value]
        return Widget(widget_id=widget_id, name=command.name, size=command.size)

    async def refund_order(self, command: Refund, ctx: ToolContext) -> RefundDone:
        refund_id = await self._effect(ctx, "refund_order", f"{command.order_id}:{command.amount}")
        return RefundDone(refund_id=refund_id, order_id=command.order_id, amount=command.amount)

    async def ship_order(self, command: Shipment, ctx: ToolContext) -> Shipped:
        shipment_id = await self._effect(ctx, "ship_order", command.order_id)
        return Shipped(shipment_id=shipment_id, order_id=command.order_id)

    async def send_payout(self, command: Payout, ctx: ToolContext) -> PayoutSent:
        # The effect row records what really ran, the secret included.
        detail = payout_detail(command.iban.get_secret_value(), command.amount, command.memo)
        payout_id = await self._effect(ctx, "send_payout", detail)
        return PayoutSent(payout_id=payout_id, order_id=command.order_id, amount=command.amount)

    async def list_widgets(self, query: Query) -> Count:
        return Count(widgets=0)


async def create_tables(store: SqlStore) -> None:
    """Create the application's table (idempotent), beside charter's."""
    async with store.engine.begin() as conn:
        await conn.run_sync(metadata.create_all)


async def battery_host(store: SqlStore, **options: Any) -> tuple[Battery, Host]:
    """A battery registry and a host on ``store`` (which is also the audit sink)."""
    await create_tables(store)
    battery = Battery()
    return battery, Host(battery.registry, store=store, **options)


@dataclass
class Env:
    """A store on the test's database, the battery's tools and a host over both."""

    store: SqlStore
    battery: Battery
    host: Host
    clock: Clock


EnvFactory = Callable[..., Awaitable[Env]]
"""``await make_env(pool_size=…, **host_options)`` → an ``Env`` on the test's database."""


class Observer:
    """Looks at the database from outside: a plain engine charter does not configure.

    Its reads never take a lock (no ``BEGIN IMMEDIATE`` on SQLite), so a test can count
    rows while a call holds its write transaction open, and see only committed rows.
    """

    def __init__(self, url: str) -> None:
        self.engine: AsyncEngine = create_async_engine(url, poolclass=sa.NullPool)

    async def count(self, table: str, **where: str) -> int:
        """Committed rows in ``table``, optionally filtered by equal columns."""
        clauses = " AND ".join(f"{column} = :{column}" for column in where)
        sql = f"SELECT count(*) FROM {table}" + (f" WHERE {clauses}" if clauses else "")
        async with self.engine.connect() as conn:
            return int((await conn.execute(sa.text(sql), where)).scalar_one())

    async def effect_ids(self, **where: str) -> list[str]:
        """The ids of the committed effect rows, optionally filtered, sorted."""
        return await self._effect_column("id", where)

    async def details(self, **where: str) -> list[str]:
        """The ``detail`` of the committed effect rows, optionally filtered, sorted."""
        return await self._effect_column("detail", where)

    async def _effect_column(self, column: str, where: dict[str, str]) -> list[str]:
        statement = sa.select(effects.c[column])
        for name, value in where.items():
            statement = statement.where(effects.c[name] == value)
        async with self.engine.connect() as conn:
            return sorted(str(row[0]) for row in await conn.execute(statement))

    async def entry(self, request_id: str) -> dict[str, Any] | None:
        """The committed ledger row of ``request_id`` (any tenant or principal), as a dict."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.text(f"SELECT * FROM {LEDGER} WHERE request_id = :r"), {"r": request_id}
                )
            ).first()
        return None if row is None else dict(row._mapping)

    async def execute(self, sql: str) -> None:
        """Run one DDL or write statement, as is, in its own committed transaction."""
        async with self.engine.begin() as conn:
            await conn.exec_driver_sql(sql)

    async def aclose(self) -> None:
        """Dispose of the engine."""
        await self.engine.dispose()


CALLERS = 64
"""Callers in a burst: reliability.md's N."""
ITERATIONS = 20
"""Bursts per concurrency test: one lucky run proves nothing (reliability.md §6.1)."""


def no_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The host logs every internal error (a raw IntegrityError, 'database is locked')."""
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


async def burst(
    host: Host,
    battery: Battery,
    calls: Sequence[tuple[str, dict[str, Any], Principal]],
    *,
    hold: bool = True,
    timeout: float = 90,
) -> list[ToolOutcome]:
    """Make ``calls`` concurrently, released together by a barrier; outcomes in order.

    With ``hold``, a handler that runs keeps its transaction open until every caller has
    called ``invoke``, so the others really race it: on PostgreSQL they wait on its
    uncommitted key, on SQLite for its write lock. ``timeout`` turns a deadlock into a
    failure instead of a hang.
    """
    barrier = asyncio.Barrier(len(calls))
    started = 0
    gate = Hold(release=asyncio.Event(), reached=asyncio.Event())

    async def caller(name: str, arguments: dict[str, Any], principal: Principal) -> ToolOutcome:
        nonlocal started
        await barrier.wait()
        started += 1
        if started == len(calls):
            gate.release.set()
        return await host.invoke(name, arguments, principal)

    battery.hold = gate if hold else None
    try:
        async with asyncio.timeout(timeout):
            return list(await asyncio.gather(*(caller(*call) for call in calls)))
    finally:
        battery.hold = None


def rid() -> str:
    """A fresh request id."""
    return str(uuid.uuid4())


def widget(name: str, request_id: str | None, **extra: Any) -> dict[str, Any]:
    """``create_widget`` arguments with a ``_charter`` block (no block without an id)."""
    controls = {"requestId": request_id} if request_id is not None else {}
    controls.update(extra.pop("_controls", {}))
    arguments: dict[str, Any] = {"name": name, **extra}
    if controls:
        arguments["_charter"] = controls
    return arguments


def refund(
    order_id: str,
    amount: int,
    request_id: str,
    *,
    approval_id: str | None = None,
    confirmed: object = True,
    **controls: Any,
) -> dict[str, Any]:
    """``refund_order`` arguments: confirmed by default, with the approval when given."""
    block: dict[str, Any] = {"requestId": request_id, **controls}
    if confirmed is not None:
        block["confirmed"] = confirmed
    if approval_id is not None:
        block["approvalId"] = approval_id
    return {"order_id": order_id, "amount": amount, "_charter": block}


def payout(
    iban: str,
    request_id: str,
    *,
    memo: str = "rent",
    tags: Sequence[str] = ("b", "a"),
    approval_id: str | None = None,
) -> dict[str, Any]:
    """Payout arguments for order ``o-1``, 100, confirmed, with the approval when given."""
    block: dict[str, Any] = {"requestId": request_id, "confirmed": True}
    if approval_id is not None:
        block["approvalId"] = approval_id
    return {
        "order_id": "o-1",
        "iban": iban,
        "amount": 100,
        "memo": memo,
        "tags": list(tags),
        "_charter": block,
    }


def payout_detail(iban: str, amount: int, memo: str) -> str:
    """The effect row's ``detail`` of a payout that ran."""
    return f"{iban}:{amount}:{memo}"


def completed(outcome: object) -> Completed:
    """The outcome as ``Completed`` (fails the test with the outcome otherwise)."""
    assert isinstance(outcome, Completed), outcome
    return outcome


def executed_once(outcomes: Sequence[ToolOutcome]) -> Completed:
    """Every outcome completed, exactly one ran the handler, all carry the same output."""
    assert all(isinstance(o, Completed) for o in outcomes), [
        o for o in outcomes if not isinstance(o, Completed)
    ]
    done = [completed(o) for o in outcomes]
    [first] = [o for o in done if not o.replayed]
    assert {str(o.output) for o in done} == {str(first.output)}
    return first


def failure(outcome: object, code: ErrorCode, reason: str | None = None) -> Failed:
    """The outcome as ``Failed`` with ``code`` (and ``reason`` when given)."""
    assert isinstance(outcome, Failed), outcome
    assert outcome.code is code, outcome
    if reason is not None:
        assert outcome.reason == reason, outcome
    return outcome


def refused(outcome: object, cause: str) -> Denied:
    """The outcome as a final ``Denied`` with ``cause`` (a person's denial, an expiry)."""
    assert isinstance(outcome, Denied), outcome
    assert outcome.cause == cause, outcome
    return outcome


def approval_id_of(outcome: object) -> str:
    """The ``approvalId`` of an approval interaction."""
    assert isinstance(outcome, InteractionRequired), outcome
    assert outcome.gate == "approval" and outcome.interaction.kind == "approval", outcome
    assert outcome.approval_id == outcome.interaction.id
    return outcome.approval_id


async def approved(host: Host, arguments: dict[str, Any], principal: Principal = ALICE) -> str:
    """Ask for an approval for ``refund_order(arguments)`` and have ``APPROVER`` grant it."""
    approval_id = approval_id_of(await host.invoke("refund_order", arguments, principal))
    approver = APPROVER if principal.tenant_id == "acme" else GLOBEX_APPROVER
    granted = await host.approvals.grant(approval_id, approver)
    assert not isinstance(granted, Failed), granted
    return approval_id
