"""The console's Activity tab shows each call's undelivered effects, in real Chromium."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from http_support import serve
from playwright.sync_api import Page, expect
from test_http_console_browser import sign_in
from test_http_effects import TOKENS
from tests.effects.kit import FakeProvider, build, refund

from charter.auth import StaticAuthenticator
from charter.http import create_app

pytestmark = pytest.mark.browser


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

    # Playwright's sync API runs an event loop in this thread: stage in another.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, stage()).result()
    with serve(create_app(host, mcp=False)) as url:
        sign_in(page, url, "approver")
        page.get_by_role("tab", name="Activity").click()
        activity = page.get_by_role("tabpanel", name="Activity")
        expect(activity.get_by_role("columnheader", name="Effects")).to_be_visible()
        rows = activity.get_by_role("row")

        def row(request_id: str):  # type: ignore[no-untyped-def]
            # The call's own row (its effect's attempts have rows of their own).
            return rows.filter(has_text="bookings.refund").filter(
                has=page.locator(f'td[title="{request_id}"]')
            )

        expect(row(dead)).to_contain_text("payments.refund dead")
        expect(row(dead).locator(".badge-danger", has_text="dead")).to_have_attribute(
            "title", "2/2 attempts · ConnectionError: provider unavailable (call 2)"
        )
        expect(row(retrying)).to_contain_text("payments.refund failed, retrying")
        expect(row(delivered)).to_contain_text("1 delivered")
        attempts = rows.filter(has_text="effect worker")
        expect(attempts.filter(has_text="effect dead")).to_have_count(1)
        expect(attempts.filter(has_text="effect delivered")).to_have_count(1)
