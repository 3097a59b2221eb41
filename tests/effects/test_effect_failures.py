"""What a failed attempt leaves behind: the exception's class and an error id on the row,
in its audit event and in what callers read; the exception's text only in the operator's
log, under that error id. A ``CancelledError`` the function raises is such a failure; only
the cancellation of the attempt's own task propagates."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from tests.effects.kit import AGENT, FakeProvider, RefundPayload, build, refund

from charter import Completed
from charter.host import EffectListing
from charter.http._payloads import EffectBody
from charter.ledger import LedgerStore

pytestmark = pytest.mark.anyio

WITHHELD = re.compile(r"ConnectionError\. Error id: (err_[0-9a-f]{16})\.")


async def test_a_failed_attempt_shows_its_class_and_an_error_id_and_logs_its_text(
    outbox_store: LedgerStore, caplog: pytest.LogCaptureFixture
) -> None:
    host, _ = build(outbox_store, provider=FakeProvider(failures=1))
    with caplog.at_level(logging.WARNING, logger="charter"):
        assert isinstance(await refund(host), Completed)
    [record] = await host.effects.list()
    assert record.status == "pending" and record.last_error is not None
    shown = WITHHELD.fullmatch(record.last_error)
    assert shown is not None, record.last_error
    error_id = shown.group(1)
    # What the calling agent reads (GET /v1/effects) holds no word of the exception's text.
    listing = await host.effects.visible(AGENT)
    assert isinstance(listing, EffectListing), listing
    [seen] = listing.effects
    body = EffectBody.from_record(seen).model_dump_json(by_alias=True)
    assert record.last_error in body and "provider unavailable" not in body
    [event] = [e for e in await host.audit.events(tenant="acme") if e.note == record.key]
    assert event.action == "effect.retried" and event.reason == record.last_error
    # The operator finds the text, and the traceback, under the same error id.
    [logged] = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged.exc_text is not None and "provider unavailable (call 1)" in logged.exc_text
    assert record.key in logged.getMessage() and "payments.refund" in logged.getMessage()


class CancellingProvider(FakeProvider):
    """A provider whose client awaits a future some other code cancelled."""

    def __init__(self, entered: asyncio.Event | None = None) -> None:
        super().__init__()
        self.entered = entered

    async def refund(self, payload: RefundPayload, key: str) -> None:
        self.calls[key] += 1
        if self.entered is not None:  # block until the test cancels the attempt's task
            self.entered.set()
            await asyncio.Event().wait()
        shared = asyncio.get_running_loop().create_future()
        shared.cancel()
        await shared


async def test_an_effect_raising_cancelled_error_itself_is_a_failed_attempt() -> None:
    provider = CancellingProvider()
    host, _ = build(provider=provider)
    outcome = await refund(host)  # the fast path's attempt fails; the call still completed
    assert isinstance(outcome, Completed) and not outcome.replayed
    [record] = await host.effects.list()
    assert (record.status, record.attempts, record.leased_by) == ("pending", 1, None)
    assert record.last_error is not None
    assert re.fullmatch(r"CancelledError\. Error id: err_[0-9a-f]{16}\.", record.last_error)
    actions = [e.action for e in await host.audit.events(tenant="acme")]
    assert "effect.retried" in actions


async def test_cancelling_the_task_running_an_attempt_still_cancels_it() -> None:
    entered = asyncio.Event()
    host, _ = build(provider=CancellingProvider(entered))
    record = host.effects.record(
        "payments.refund", {"booking_id": "bk_1", "amount_cents": 5}, tenant_id="acme", key=("c",)
    )
    async with host.store.transaction(wait=1) as tx:
        assert await tx.insert_effect(record)
    attempt = asyncio.create_task(host.effects.attempt(record, worker=host.effects.owner))
    await entered.wait()
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    left = await host.effects.get(record.key)
    # Not recorded as a result: the lease runs out and a worker tries again.
    assert left is not None and left.status == "pending" and left.leased_by == host.effects.owner
