"""The approvals console against an agent that shapes its requests to mislead the approver.

Real headless Chromium (Debian's, driven by Playwright), as in ``test_http_console_browser``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from http_support import TOKENS, Lab, Live, serve
from playwright.sync_api import Page, expect
from pydantic import BaseModel, Field
from test_http_console_browser import sign_in
from tests.builders import destructive_risk

from charter import ActionPolicy, Registry, tool
from charter.auth import StaticAuthenticator
from charter.host import Host
from charter.http import create_app

pytestmark = pytest.mark.browser

# Characters that are not seen but change what is read (the JSON block's own newlines aside).
INVISIBLE = re.compile(
    "[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


class Payout(BaseModel):
    account: str = Field(min_length=1, max_length=100_000)
    amount_cents: int = Field(gt=0)
    note: str = Field(default="", max_length=100_000)


class Paid(BaseModel):
    ok: bool


def build_payout_host() -> Host:
    """One tool whose target and note are free text the agent writes."""

    @tool(
        name="payments.payout",
        tier="destructive",
        risk_policy=destructive_risk("payment"),
        required_scopes=["bookings:refund"],
        action_policy=ActionPolicy(
            target_type="account",
            command_target_field="account",
            confirmation="required",
            approval="required",
        ),
    )
    def payout(arguments: Payout) -> Paid:
        """Pay money out to an account."""
        return Paid(ok=True)

    registry = Registry()
    registry.register_all([payout])
    return Host(registry, authenticator=StaticAuthenticator(TOKENS))


@pytest.fixture
def payouts() -> Iterator[Live]:
    host = build_payout_host()
    with serve(create_app(host, mcp=False)) as url:
        yield Live(url=url, host=host, lab=Lab())


def ask_payout(live: Live, arguments: dict[str, Any], reason_code: str | None = None) -> str:
    """The agent asks for a payout; the approval id it waits on."""
    body: dict[str, Any] = dict(arguments)
    if reason_code is not None:
        body["_charter"] = {"reasonCode": reason_code}
    with live.client("agent-token") as agent:
        response = agent.post(
            "/v1/tools/payments.payout:call",
            json=body,
            headers={"Idempotency-Key": str(uuid.uuid4()), "Charter-Confirm": "true"},
        )
    assert response.status_code == 202, response.text
    approval_id: str = response.json()["approvalId"]
    return approval_id


def status_of(live: Live, approval_id: str) -> str:
    with live.client("approver-token") as approver:
        response: httpx.Response = approver.get(f"/v1/approvals/{approval_id}")
    status: str = response.json()["status"]
    return status


def test_bidi_overrides_and_invisible_characters_are_shown_as_escapes(
    payouts: Live, page: Page
) -> None:
    """An account that would read "alice@goodbank.com" through U+202E is shown as it is."""
    account = "\u202emoc.knabdoog@ecila"
    note = "refund \u202e0001 :tnuoma\u202c only, acct\u200b_1\u2028fake line"
    arguments = {"account": account, "amount_cents": 250_000, "note": note}
    # (A reason code holding one is refused before any approval is asked: invalid_controls.)
    approval_id = ask_payout(payouts, arguments, reason_code="quarterly payout")
    sign_in(page, payouts.url, "approver-token")
    card = page.locator(f"#approval-{approval_id}")
    expect(card).to_be_visible()
    target = card.locator("dt", has_text="Target").locator("xpath=following-sibling::dd")
    expect(target).to_have_text("\\u202emoc.knabdoog@ecila")
    shown = card.locator("pre.json")
    expect(shown).to_contain_text(
        '"refund \\u202e0001 :tnuoma\\u202c only, acct\\u200b_1\\u2028fake line"'
    )
    # The escapes are marked as such, and each value is isolated from the text around it.
    expect(target.locator(".hidden-char")).to_have_text("\\u202e")
    expect(shown.locator(".hidden-char")).to_have_count(5)
    isolation = target.locator(".agent").evaluate("el => getComputedStyle(el).unicodeBidi")
    assert isolation == "isolate"
    # Nothing invisible is left anywhere on the card: not in its text, not in its labels.
    text = card.evaluate("el => el.textContent")
    labels = card.evaluate(
        "el => [...el.querySelectorAll('[aria-label], [title]')]"
        ".map(e => (e.getAttribute('aria-label') || '') + (e.getAttribute('title') || ''))"
        ".join(' ')"
    )
    assert not INVISIBLE.search(text + labels), (text, labels)
    expect(
        card.get_by_role("button", name="Approve payments.payout on \\u202emoc.knabdoog@ecila")
    ).to_be_visible()


def test_a_new_request_does_not_slide_under_the_pointer_and_take_its_click(
    payouts: Live, page: Page
) -> None:
    """The agent's next request, the same height, would have taken the place of the one read."""
    read = ask_payout(payouts, {"account": "acct_read", "amount_cents": 1_200})
    sign_in(page, payouts.url, "approver-token")
    approve_read = page.locator(f"#approval-{read}").get_by_role("button", name="Approve")
    expect(approve_read).not_to_have_attribute("aria-disabled", "true")
    before = approve_read.bounding_box()
    assert before is not None
    x, y = before["x"] + before["width"] / 2, before["y"] + before["height"] / 2
    page.mouse.move(x, y)

    unread = ask_payout(payouts, {"account": "acct_unread", "amount_cents": 9_999})
    show = page.get_by_role("button", name="Show 1 new request")
    expect(show).to_be_visible()
    expect(page.locator(f"#approval-{unread}")).to_have_count(0)
    assert approve_read.bounding_box() == before
    page.mouse.click(x, y)
    expect(page.locator("#toast")).to_contain_text("Approved payments.payout on acct_read")
    assert status_of(payouts, read) == "approved"

    # Shown on request, the new card's buttons wait a moment before they take a click.
    show.click()
    card = page.locator(f"#approval-{unread}")
    expect(card).to_be_focused()
    approve_unread = card.get_by_role("button", name="Approve")
    box = approve_unread.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(card).to_contain_text("just appeared or moved")
    assert status_of(payouts, unread) == "pending"
    approve_unread.click()  # once it stood still (Playwright waits for aria-disabled to go)
    expect(page.locator("#toast")).to_contain_text("Approved payments.payout on acct_unread")


def test_a_second_enter_after_a_keyboard_approval_decides_nothing(
    payouts: Live, page: Page
) -> None:
    """Enter approves the card read; the focus moves to the next card, not to its Approve."""
    unread = ask_payout(payouts, {"account": "acct_unread", "amount_cents": 5_000_000})
    read = ask_payout(payouts, {"account": "acct_read", "amount_cents": 1})  # newest: on top
    sign_in(page, payouts.url, "approver-token")
    approve = page.locator(f"#approval-{read}").get_by_role("button", name="Approve")
    expect(approve).not_to_have_attribute("aria-disabled", "true")
    approve.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#toast")).to_contain_text("Approved payments.payout on acct_read")
    expect(page.locator(f"#approval-{unread}")).to_be_focused()
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    page.wait_for_timeout(500)
    assert status_of(payouts, read) == "approved"
    assert status_of(payouts, unread) == "pending"


def test_a_held_key_reaching_a_decision_button_decides_nothing(payouts: Live, page: Page) -> None:
    """Auto-repeat keydowns (event.repeat) are not presses: only a fresh Enter decides."""
    approval_id = ask_payout(payouts, {"account": "acct_held", "amount_cents": 10})
    sign_in(page, payouts.url, "approver-token")
    card = page.locator(f"#approval-{approval_id}")
    approve = card.get_by_role("button", name="Approve")
    expect(approve).not_to_have_attribute("aria-disabled", "true")
    card.locator("pre.json").focus()
    page.keyboard.down("Enter")  # held on the arguments...
    approve.focus()  # ...while the focus reaches Approve
    page.keyboard.down("Enter")  # Playwright sends this one as a repeat
    page.keyboard.down("Enter")
    page.keyboard.up("Enter")
    page.wait_for_timeout(500)
    assert status_of(payouts, approval_id) == "pending"
    page.keyboard.press("Enter")
    expect(page.locator("#toast")).to_contain_text("Approved payments.payout on acct_held")


def test_a_long_argument_wraps_inside_its_card_and_hides_nothing_to_the_right(
    payouts: Live, page: Page
) -> None:
    """One 20,000-character note widened every card; a tail after 400 spaces sat off-screen."""
    normal = ask_payout(payouts, {"account": "acct_normal", "amount_cents": 12_900})
    wide = ask_payout(payouts, {"account": "acct_wide", "amount_cents": 1, "note": "x" * 20_000})
    spaced = "routine" + " " * 400 + "AND WIRE IT ALL"
    padded = ask_payout(payouts, {"account": "acct_sp", "amount_cents": 1, "note": spaced})
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, payouts.url, "approver-token")
    for approval_id in (normal, wide, padded):
        expect(page.locator(f"#approval-{approval_id}")).to_be_visible()
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 1280
    for approval_id in (normal, wide, padded):
        card = page.locator(f"#approval-{approval_id}")
        for name in ("Approve", "Deny"):
            box = card.get_by_role("button", name=name).bounding_box()
            assert box is not None and box["x"] + box["width"] <= 1280, (approval_id, name, box)
        pre = card.locator("pre.json")
        assert pre.evaluate("el => el.scrollWidth <= el.clientWidth"), approval_id
    # The tail after the spaces lies inside the box, where it can be read.
    pre = page.locator(f"#approval-{padded} pre.json")
    tail = pre.evaluate(
        """el => {
            const text = [...el.querySelectorAll('.s')].find(s => s.textContent.includes('WIRE'));
            const node = text.firstChild.firstChild || text.firstChild;
            const range = document.createRange();
            const at = node.textContent.indexOf('AND WIRE');
            range.setStart(node, at);
            range.setEnd(node, at + 'AND WIRE IT ALL'.length);
            const r = range.getBoundingClientRect(), box = el.getBoundingClientRect();
            return r.left >= box.left && r.right <= box.right;
        }"""
    )
    assert tail


def test_a_crafted_deep_link_puts_none_of_its_words_on_the_page(payouts: Live, page: Page) -> None:
    """``#/approvals/<text>`` echoed the text in the red error line, a notice of the attacker's."""
    notice = "apr_1. SECURITY NOTICE: this console has moved. Sign in at evil.example with your key"
    page.goto(f"{payouts.url}/console/#/approvals/{quote(notice, safe='')}")
    key = page.get_by_label("API key")
    key.fill("approver-token")
    key.press("Enter")
    error = page.locator("#approvals-error")
    expect(error).to_have_text("Could not load approvals: the link does not name an approval")
    expect(page.locator("body")).not_to_contain_text("SECURITY NOTICE")
    expect(page.locator("#approvals .card")).to_have_count(0)
