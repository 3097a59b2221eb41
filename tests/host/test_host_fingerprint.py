"""What a request id and an approval bind, through ``Host.invoke`` on the in-memory store.

The fingerprint covers every validated value: a ``SecretStr`` (which dumps as
``"**********"``), a ``Field(exclude=True)`` and a set (which dumps in hash order). The
same on SQLite and PostgreSQL: ``tests/battery`` L04, L05, A04 and A12.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from tests.builders import HiddenPayout as Payout
from tests.builders import risk, tiered_tool

from charter import ActionPolicy, ErrorCode, Principal, Registry, RiskTier
from charter.host import Host
from charter.ledger import MemoryStore
from charter.outcome import Completed, Failed, InteractionRequired

pytestmark = pytest.mark.anyio

PAYER = Principal(subject="payer", tenant_id="acme", scopes=frozenset({"payouts:send"}))
APPROVER = Principal(subject="boss", tenant_id="acme", scopes=frozenset({"charter:approve"}))
ApprovalPolicy = Literal["never", "conditional", "required"]
ORIGINAL, SWAPPED = "DE89 3704 0044 0532 0130 00", "DE44 5001 0517 5407 3249 31"


class Sent(BaseModel):
    amount: int


class Bank:
    """Two payout tools (one ledgered, one needing approval) and what really ran."""

    def __init__(self) -> None:
        self.paid: list[tuple[str, int, str]] = []
        registry = Registry()

        async def pay(payout: Payout) -> Sent:
            self.paid.append((payout.iban.get_secret_value(), payout.amount, payout.memo))
            return Sent(amount=payout.amount)

        tools: tuple[tuple[str, RiskTier, ApprovalPolicy], ...] = (
            ("pay", RiskTier.WRITE, "never"),
            ("pay_big", RiskTier.SENSITIVE, "required"),
        )
        for name, tier, approval in tools:
            policy = ActionPolicy(target_type="account", approval=approval)
            irreversible = risk(reversible=False)
            registry.register(
                tiered_tool(
                    name,
                    tier,
                    pay,
                    Payout,
                    Sent,
                    risk_policy=irreversible,
                    required_scopes=["payouts:send"],
                    action_policy=policy,
                )
            )
        self.host = Host(registry)
        assert isinstance(self.host.store, MemoryStore)

    async def call(self, tool: str, iban: str, request_id: str, **options: Any) -> Any:
        controls: dict[str, Any] = {"requestId": request_id, "confirmed": True}
        if "approval_id" in options:
            controls["approvalId"] = options.pop("approval_id")
        arguments = {"iban": iban, "amount": 100, "memo": "rent", **options}
        return await self.host.invoke(tool, {**arguments, "_charter": controls}, PAYER)


def conflict(outcome: object) -> None:
    assert isinstance(outcome, Failed), outcome
    assert (outcome.code, outcome.reason) == (
        ErrorCode.IDEMPOTENCY_CONFLICT,
        "idempotency_key_reused",
    )
    shown = outcome.model_dump_json()
    assert ORIGINAL[:9] not in shown and SWAPPED[:9] not in shown


async def test_an_approved_payout_never_runs_with_a_swapped_iban() -> None:
    bank, request_id = Bank(), str(uuid.uuid4())
    asked = await bank.call("pay_big", ORIGINAL, request_id)
    assert isinstance(asked, InteractionRequired)
    approval_id = asked.interaction.id
    record = await bank.host.approvals.get(APPROVER, approval_id)
    assert record is not None
    # The approver sees what is bound: the IBAN as a bound secret, the excluded memo.
    assert record.arguments == {
        "iban": {"$secret": "bound"},
        "amount": 100,
        "memo": "rent",
        "tags": {"$set": []},
    }
    assert not isinstance(await bank.host.approvals.grant(approval_id, APPROVER), Failed)
    for request in (request_id, str(uuid.uuid4())):
        for iban, memo in ((SWAPPED, "rent"), (ORIGINAL, "other")):
            denied = await bank.call("pay_big", iban, request, memo=memo, approval_id=approval_id)
            assert isinstance(denied, Failed), denied
            assert (denied.code, denied.reason) == (
                ErrorCode.AUTHORIZATION_DENIED,
                "fingerprint_mismatch",
            )
    assert bank.paid == []
    done = await bank.call("pay_big", ORIGINAL, request_id, approval_id=approval_id)
    assert isinstance(done, Completed) and not done.replayed
    # The swapped IBAN under the approved request id is another command, not a replay.
    conflict(await bank.call("pay_big", SWAPPED, request_id, approval_id=approval_id))
    assert bank.paid == [(ORIGINAL, 100, "rent")]


@pytest.mark.parametrize(
    "change",
    [{"iban": SWAPPED}, {"memo": "other"}, {"tags": ["b", "a", "c"]}],
    ids=["secret", "excluded-field", "set-member"],
)
async def test_a_retry_that_changes_a_hidden_value_is_a_conflict(change: dict[str, Any]) -> None:
    bank, request_id = Bank(), str(uuid.uuid4())
    first = await bank.call("pay", ORIGINAL, request_id, tags=["a", "b"])
    assert isinstance(first, Completed)
    changed = {"tags": ["a", "b"], **change}
    conflict(await bank.call("pay", changed.pop("iban", ORIGINAL), request_id, **changed))
    # The same values in another form are the same request.
    replay = await bank.call("pay", ORIGINAL, request_id, tags=["b", "a", "a"])
    assert isinstance(replay, Completed) and replay.replayed
    assert bank.paid == [(ORIGINAL, 100, "rent")]


class CamelPayout(BaseModel):
    """camelCase on the wire, extra fields kept: a field can be sent twice, by both names."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)
    account: str
    amount_cents: int


async def test_an_approval_never_covers_a_field_sent_again_by_its_other_name() -> None:
    # {"amountCents": 999999, "amount_cents": 1}: the handler gets 999999, and the 1 is
    # kept as an extra field. It must neither pass for the 1-cent call nor hide the 999999.
    paid: list[int] = []

    async def pay(payout: CamelPayout) -> Sent:
        paid.append(payout.amount_cents)
        return Sent(amount=payout.amount_cents)

    registry = Registry()
    registry.register(
        tiered_tool(
            "payouts.send",
            RiskTier.SENSITIVE,
            pay,
            CamelPayout,
            Sent,
            risk_policy=risk(reversible=False),
            required_scopes=["payouts:send"],
            action_policy=ActionPolicy(target_type="account", approval="required"),
        )
    )
    host = Host(registry)

    async def call(request_id: str, approval_id: str | None = None, **arguments: Any) -> Any:
        controls = {"requestId": request_id, "confirmed": True}
        if approval_id is not None:
            controls["approvalId"] = approval_id
        return await host.invoke("payouts.send", {**arguments, "_charter": controls}, PAYER)

    honest: dict[str, Any] = {"amountCents": 1}
    spoofed: dict[str, Any] = {"amountCents": 999_999, "amount_cents": 1}
    request_id = str(uuid.uuid4())
    asked = await call(request_id, account="acc_1", **honest)
    assert isinstance(asked, InteractionRequired)
    approval_id = asked.interaction.id
    assert not isinstance(await host.approvals.grant(approval_id, APPROVER), Failed)
    denied = await call(request_id, approval_id, account="acc_1", **spoofed)
    assert isinstance(denied, Failed), denied
    assert denied.reason == "fingerprint_mismatch"
    # Asked for in its own right, the approver is shown the value the handler would get.
    asked = await call(str(uuid.uuid4()), account="acc_1", **spoofed)
    assert isinstance(asked, InteractionRequired)
    record = await host.approvals.get(APPROVER, asked.interaction.id)
    assert record is not None
    assert record.arguments == {
        "account": "acc_1",
        "amount_cents": 999_999,
        "$extra": {"amount_cents": 1},
    }
    assert paid == []


class Readings(BaseModel):
    values: Iterable[int] = ()


async def test_a_value_without_a_canonical_form_is_refused_before_the_ledger() -> None:
    # An Iterable validates to a one-shot iterator: dumping it to hash it handed the
    # handler an exhausted one. Form 1 has no form for it, so the call is refused.
    seen: list[list[int]] = []

    async def record(readings: Readings) -> Sent:
        seen.append(list(readings.values))
        return Sent(amount=0)

    registry = Registry()
    registry.register(
        tiered_tool(
            "record", RiskTier.WRITE, record, Readings, Sent, description="Record readings."
        )
    )
    store = MemoryStore()
    host = Host(registry, store=store)
    arguments = {"values": [1, 2], "_charter": {"requestId": str(uuid.uuid4())}}
    outcome = await host.invoke("record", arguments, PAYER)
    assert isinstance(outcome, Failed), outcome
    assert (outcome.code, outcome.reason) == (ErrorCode.INVALID_INPUT, "not_canonical")
    assert "input.values" in outcome.message
    assert seen == [] and store.entries == {}
