"""The approvals console in real headless Chromium (Debian's, driven by Playwright).

Set ``CHARTER_UPDATE_SCREENSHOT=1`` to rewrite ``docs/console.png`` from this run.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import Lab, Live, build_host, serve, serve_standard_app
from playwright.sync_api import Browser, Page, expect

from charter import RateLimit
from charter.http import create_app

pytestmark = pytest.mark.browser

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "console.png"


@pytest.fixture
def console() -> Iterator[Live]:
    """A fresh server per test, so each page starts from a known set of approvals."""
    yield from serve_standard_app(mcp=False)


def ask(agent: httpx.Client, tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
    """Call a tool that needs approval; return (request id, approval id)."""
    request_id = str(uuid.uuid4())
    response = agent.post(
        f"/v1/tools/{tool}:call",
        json=arguments,
        headers={"Idempotency-Key": request_id, "Charter-Confirm": "true"},
    )
    assert response.status_code == 202, response.text
    return request_id, response.json()["approvalId"]


def sign_in(page: Page, url: str, token: str) -> None:
    page.goto(f"{url}/console/")
    key = page.get_by_label("API key")
    expect(key).to_be_focused()
    key.fill(token)
    key.press("Enter")
    expect(page.get_by_role("tab", name="Approvals")).to_be_visible()


def test_an_approver_sees_a_request_arrive_and_approves_it_with_the_keyboard(
    console: Live, page: Page
) -> None:
    refund = {"booking_id": "bkg_42", "amount_cents": 12_900}
    with console.client("agent-token") as agent:
        request_id, approval_id = ask(agent, "bookings.refund", refund)
        sign_in(page, console.url, "approver-token")
        card = page.locator(f"#approval-{approval_id}")
        expect(card).to_be_visible()
        expect(card.get_by_role("heading", name="bookings.refund")).to_be_visible()
        expect(card).to_contain_text("bkg_42")
        expect(card).to_contain_text("agent-7")
        expect(card).to_contain_text("critical risk")
        expect(card).to_contain_text('"amount_cents": 12900')
        expect(card).to_contain_text("min left")
        expect(page.get_by_role("tab", name="Approvals")).to_contain_text("1")

        # A second request arrives while the page is open: announced without a reload, and
        # shown on request, so it never pushes down the card being read.
        _, later_id = ask(agent, "trips.transfer", {"trip_id": "trp_7", "to_traveller": "tvl_9"})
        expect(page.locator("#announcer")).to_contain_text("New approval request: trips.transfer")
        later = page.locator(f"#approval-{later_id}")
        expect(later).to_have_count(0)
        page.get_by_role("button", name="Show 1 new request").click()
        expect(later).to_be_visible()
        expect(later).to_be_focused()
        expect(later).to_contain_text("high risk")

        # Keyboard only: the reason box, then Tab to Approve, then Enter.
        reason = card.get_by_label("Reason (optional)")
        reason.focus()
        page.keyboard.type("Customer called; refund agreed")
        page.keyboard.press("Tab")
        approve = card.get_by_role("button", name="Approve bookings.refund on bkg_42")
        expect(approve).to_be_focused()
        page.keyboard.press("Tab")
        expect(card.get_by_role("button", name="Deny bookings.refund on bkg_42")).to_be_focused()
        page.keyboard.press("Shift+Tab")
        expect(approve).not_to_have_attribute("aria-disabled", "true")  # it moved a moment ago
        page.keyboard.press("Enter")
        expect(page.locator("#toast")).to_contain_text("Approved bookings.refund on bkg_42")
        # Focus moves on to the next request waiting for a decision: its card, not its buttons.
        expect(later).to_be_focused()

        status = agent.get(f"/v1/actions/{request_id}").json()
        assert status["status"] == "approved"
        done = agent.post(
            "/v1/tools/bookings.refund:call",
            json=refund,
            headers={
                "Idempotency-Key": request_id,
                "Charter-Confirm": "true",
                "Charter-Approval": approval_id,
            },
        )
    assert done.status_code == 200
    assert done.json()["output"] == {"booking_id": "bkg_42", "refunded_cents": 12_900}
    assert console.lab.runs["refund:bkg_42"] == 1
    with console.client("approver-token") as approver:
        record = approver.get(f"/v1/approvals/{approval_id}").json()
    assert record["status"] == "consumed"
    assert record["decisionReason"] == "Customer called; refund agreed"


def test_a_denial_with_a_click_and_a_reason(console: Live, page: Page) -> None:
    with console.client("agent-token") as agent:
        request_id, approval_id = ask(
            agent, "trips.transfer", {"trip_id": "trp_8", "to_traveller": "tvl_1"}
        )
        sign_in(page, console.url, "approver-token")
        card = page.locator(f"#approval-{approval_id}")
        card.get_by_label("Reason (optional)").fill("Not the account holder")
        card.get_by_role("button", name="Deny trips.transfer on trp_8").click()
        expect(page.locator("#toast")).to_contain_text("Denied trips.transfer on trp_8")
        assert agent.get(f"/v1/actions/{request_id}").json()["status"] == "denied"


def test_a_wrong_key_is_refused_and_the_tabs_work_with_arrow_keys(
    console: Live, page: Page
) -> None:
    page.goto(f"{console.url}/console/")
    page.get_by_label("API key").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert").first).to_contain_text("not accepted")
    sign_in(page, console.url, "approver-token")
    expect(page.get_by_text("Nothing waiting for you")).to_be_visible()
    page.get_by_role("tab", name="Approvals").focus()
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("tab", name="Activity")).to_be_focused()
    expect(page.get_by_role("tabpanel", name="Activity")).to_be_visible()
    page.keyboard.press("ArrowRight")
    tools = page.get_by_role("tabpanel", name="Tools")
    expect(tools).to_be_visible()
    expect(tools).to_contain_text("trips.search")
    page.get_by_role("searchbox", name="Search").fill("charter")
    expect(tools).to_contain_text("No tool matches")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_focused()


def test_screenshot_of_the_console(console: Live, page: Page, tmp_path: Path) -> None:
    with console.client("agent-token") as agent, console.client("approver-token") as approver:
        agent.post("/v1/tools/trips.search:call", json={"query": "lisbon"})
        agent.post(
            "/v1/tools/trips.rename:call",
            json={"trip_id": "trp_31", "name": "Lisbon offsite"},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        _, decided = ask(agent, "trips.transfer", {"trip_id": "trp_12", "to_traveller": "tvl_3"})
        approver.post(f"/v1/approvals/{decided}:grant", json={"reason": "Manager agreed"})
        ask(
            agent,
            "trips.transfer",
            {"trip_id": "trp_31", "to_traveller": "tvl_77", "note": "Travelling instead of Sam"},
        )
        ask(agent, "bookings.refund", {"booking_id": "bkg_2207", "amount_cents": 48_500})
    sign_in(page, console.url, "approver-token")
    expect(page.locator(".card")).to_have_count(2)
    page.locator("body").click(position={"x": 5, "y": 300})  # no focus ring in the picture
    shot = tmp_path / "console.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    if os.environ.get("CHARTER_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, SCREENSHOT)


def test_the_limits_tab_shows_the_budgets_being_spent_in_the_tenant(
    browser: Browser, page: Page
) -> None:
    lab = Lab()
    host = build_host(lab, rate_limits=[RateLimit(calls=5, per=60, name="5 calls a minute")])
    with serve(create_app(host, mcp=False)) as url:
        with httpx.Client(base_url=url, headers={"Authorization": "Bearer agent-token"}) as agent:
            for _ in range(3):
                response = agent.post("/v1/tools/trips.search:call", json={"query": "lisbon"})
                assert response.status_code == 200, response.text
        sign_in(page, url, "approver-token")
        page.get_by_role("tab", name="Limits").click()
        limits = page.get_by_role("tabpanel", name="Limits")
        row = limits.get_by_role("row", name="acme/agent-7")
        expect(row).to_contain_text("every tool")
        expect(row).to_contain_text("5 calls a minute")
        expect(row).to_contain_text("3/5")
        expect(row.get_by_role("meter", name="3 of 5 used")).to_be_visible()


def test_a_revoked_grant_shows_every_decision_on_its_card(console: Live, page: Page) -> None:
    refund = {"booking_id": "bkg_77", "amount_cents": 4_200}
    with console.client("agent-token") as agent, console.client("approver-token") as approver:
        _, approval_id = ask(agent, "bookings.refund", refund)
        path = f"/v1/approvals/{approval_id}"
        assert approver.post(f"{path}:grant", json={"reason": "looks fine"}).status_code == 200
        assert approver.post(f"{path}:deny", json={"reason": "wrong card"}).status_code == 200
    sign_in(page, console.url, "approver-token")
    page.get_by_label("Show").select_option("denied")
    card = page.locator(f"#approval-{approval_id}")
    history = card.get_by_role("list", name="Decisions")
    expect(history.get_by_role("listitem")).to_have_count(2)
    expect(history.get_by_role("listitem").nth(0)).to_contain_text("Approved by acme/ana")
    expect(history.get_by_role("listitem").nth(0)).to_contain_text("looks fine")
    expect(history.get_by_role("listitem").nth(1)).to_contain_text("Revoked by acme/ana")
    expect(history.get_by_role("listitem").nth(1)).to_contain_text("wrong card")


def test_a_deep_link_opens_that_approval_after_signing_in_and_still_needs_an_approver(
    console: Live, page: Page
) -> None:
    """``/console/#/approvals/{id}`` (the link notifications carry) opens that one card."""
    with console.client("agent-token") as agent:
        _, linked_id = ask(agent, "bookings.refund", {"booking_id": "bkg_7", "amount_cents": 500})
        _, other_id = ask(agent, "trips.transfer", {"trip_id": "trp_7", "to_traveller": "tvl_9"})
    # Not signed in: the link waits for the sign-in, then opens the card with focus on it.
    page.goto(f"{console.url}/console/#/approvals/{linked_id}")
    key = page.get_by_label("API key")
    expect(key).to_be_focused()
    key.fill("approver-token")
    key.press("Enter")
    card = page.locator(f"#approval-{linked_id}")
    expect(card).to_be_visible()
    expect(card).to_be_focused()
    expect(card).to_contain_text("bkg_7")
    expect(page.locator(f"#approval-{other_id}")).to_have_count(0)
    expect(page.locator("#linked")).to_contain_text("opened from a link")
    expect(page.get_by_label("Show")).to_be_disabled()

    # Approving from the link is an approver's decision like any other.
    card.get_by_role("button", name="Approve bookings.refund on bkg_7").click()
    expect(page.locator("#toast")).to_contain_text("Approved bookings.refund on bkg_7")
    expect(page.locator(f"#approval-{linked_id}")).to_contain_text("Approved by")

    # The way back: every pending approval again.
    page.get_by_role("link", name="Show all approvals").click()
    expect(page.locator(f"#approval-{other_id}")).to_be_visible()
    expect(page.locator(f"#approval-{linked_id}")).to_have_count(0)
    expect(page.get_by_label("Show")).to_be_enabled()

    # A link to another tenant's approval shows nothing of it, like a missing one.
    with console.client("globex-token") as globex:
        _, foreign_id = ask(globex, "bookings.refund", {"booking_id": "bkg_9", "amount_cents": 9})
    for hidden in (foreign_id, "apr_" + "0" * 32):
        page.goto(f"{console.url}/console/#/approvals/{hidden}")
        expect(page.locator("#approvals-error")).to_contain_text(f"no approval {hidden}")
        expect(page.locator("#approvals .card")).to_have_count(0)


def test_a_deep_link_shows_a_requester_its_card_without_the_buttons(
    console: Live, page: Page
) -> None:
    with console.client("agent-token") as agent:
        _, linked_id = ask(agent, "bookings.refund", {"booking_id": "bkg_8", "amount_cents": 700})
    page.goto(f"{console.url}/console/#/approvals/{linked_id}")
    key = page.get_by_label("API key")
    key.fill("agent-token")
    key.press("Enter")
    card = page.locator(f"#approval-{linked_id}")
    expect(card).to_be_visible()
    expect(card).to_contain_text("bkg_8")
    # The requester's key is not an approver's: no way to decide from the link.
    expect(card.get_by_role("button", name="Approve bookings.refund on bkg_8")).to_have_count(0)


def test_the_tools_tab_lists_the_resources_and_prompts_the_key_may_use(
    browser: Browser, page: Page
) -> None:
    from content_support import build_content_host

    with serve(create_app(build_content_host(), mcp=False)) as url:
        sign_in(page, url, "ada-token")
        page.get_by_role("tab", name="Tools").click()
        tools = page.get_by_role("tabpanel", name="Tools")
        expect(tools).to_contain_text("trip://{trip_id}")
        expect(tools).to_contain_text("trips.summary")
        expect(tools).to_contain_text("handbook://travel")
        expect(tools).not_to_contain_text("audit://export")  # admin only
        page.get_by_role("searchbox", name="Search").fill("summary")
        expect(tools).not_to_contain_text("handbook://travel")
        page.get_by_role("button", name="Sign out").click()
        sign_in(page, url, "newt-token")
        page.get_by_role("tab", name="Tools").click()
        expect(tools).not_to_contain_text("trip://{trip_id}")
        expect(tools).to_contain_text("handbook://travel")
