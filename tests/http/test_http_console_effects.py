"""The console's Activity tab shows each call's undelivered effects, in real Chromium."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from http_support import serve
from playwright.sync_api import Locator, Page, expect
from test_http_console_browser import sign_in
from test_http_effects import TOKENS
from tests.effects.kit import FakeProvider, build, refund

from charter.auth import StaticAuthenticator
from charter.http import create_app

pytestmark = pytest.mark.browser

T = TypeVar("T")


def in_another_thread(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to completion: Playwright's sync API runs an event loop in this thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


def open_activity(page: Page, url: str, token: str) -> Locator:
    """Sign in with ``token`` and open the Activity tab; its panel."""
    sign_in(page, url, token)
    page.get_by_role("tab", name="Activity").click()
    return page.get_by_role("tabpanel", name="Activity")


def call_row(page: Page, rows: Locator, request_id: str) -> Locator:
    """The row of the refund call with this request id (its effect's attempts have their own)."""
    return rows.filter(has_text="bookings.refund").filter(
        has=page.locator(f'td[title="{request_id}"]')
    )


def test_the_activity_tab_shows_pending_failed_and_dead_effects_per_call(page: Page) -> None:
    provider = FakeProvider(failures=10**9)
    host, _ = build(provider=provider, max_attempts=2, authenticator=StaticAuthenticator(TOKENS))
    dead, retrying, delivered = (str(uuid.uuid4()) for _ in range(3))

    async def stage() -> None:
        await refund(host, request_id=dead)
        while (await host.effects.list(request_id=dead))[0].status != "dead":
            await host.effects.work(once=True)
        await refund(host, request_id=retrying)
        provider.failures = 0
        await refund(host, request_id=delivered)

    in_another_thread(stage())
    with serve(create_app(host, mcp=False)) as url:
        activity = open_activity(page, url, "approver")
        expect(activity.get_by_role("columnheader", name="Effects")).to_be_visible()
        rows = activity.get_by_role("row")

        def row(request_id: str) -> Locator:
            return call_row(page, rows, request_id)

        expect(row(dead)).to_contain_text("payments.refund dead")
        expect(row(dead).locator(".badge-danger", has_text="dead")).to_have_attribute(
            "title", re.compile(r"2/2 attempts · ConnectionError\. Error id: err_[0-9a-f]{16}\.")
        )
        expect(row(retrying)).to_contain_text("payments.refund failed, retrying")
        expect(row(delivered)).to_contain_text("1 delivered")
        attempts = rows.filter(has_text="effect worker")
        expect(attempts.filter(has_text="effect dead")).to_have_count(1)
        expect(attempts.filter(has_text="effect delivered")).to_have_count(1)


def test_an_admin_retries_and_discards_dead_effects_from_the_activity_tab(page: Page) -> None:
    provider = FakeProvider(failures=10**9)
    host, _ = build(provider=provider, max_attempts=1, authenticator=StaticAuthenticator(TOKENS))
    to_retry, to_discard = str(uuid.uuid4()), str(uuid.uuid4())

    async def stage() -> None:
        for request_id in (to_retry, to_discard):
            await refund(host, request_id=request_id)  # one attempt: dead at once

    in_another_thread(stage())
    with serve(create_app(host, mcp=False)) as url:
        # An approver sees the dead effects but may not change them: no buttons.
        activity = open_activity(page, url, "approver")
        expect(activity.get_by_text("payments.refund dead")).to_have_count(2)
        expect(activity.get_by_role("button", name="Retry payments.refund")).to_have_count(0)
        page.get_by_role("button", name="Sign out").click()

        rows = open_activity(page, url, "admin").get_by_role("row")

        def row(request_id: str) -> Locator:
            return call_row(page, rows, request_id)

        row(to_retry).get_by_role("button", name="Retry payments.refund").click()
        expect(row(to_retry)).to_contain_text("payments.refund failed, retrying")
        expect(row(to_retry).get_by_role("button")).to_have_count(0)
        # The effect's own "dead" row has the buttons too (for effects no call staged,
        # such as notifications, it is the only place).
        dead_row = rows.filter(has_text="effect dead").filter(
            has=page.locator(f'td[title="{to_discard}"]')
        )
        dead_row.get_by_role("button", name="Discard payments.refund").click()
        expect(row(to_discard)).to_contain_text("payments.refund discarded")
        expect(dead_row.get_by_role("button")).to_have_count(0)
        # Each change is audited as the admin's, and listed.
        expect(rows.filter(has_text="effect retry").filter(has_text="olga")).to_have_count(1)
        expect(rows.filter(has_text="effect discard").filter(has_text="olga")).to_have_count(1)
    listed = in_another_thread(host.effects.list())
    statuses = {e.request_id: e.status for e in listed}
    assert statuses == {to_retry: "pending", to_discard: "discarded"}
