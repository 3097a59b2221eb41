"""What a failed attempt leaves behind: the exception's class and an error id on the row,
in its audit event and in what callers read; the exception's text only in the operator's
log, under that error id."""

from __future__ import annotations

import logging
import re

import pytest
from tests.effects.kit import AGENT, FakeProvider, build, refund

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
