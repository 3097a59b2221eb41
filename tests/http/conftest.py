"""Fixtures for the HTTP transport tests (the parts live in ``http_support``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from http_support import Live, serve_standard_app

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def live() -> Iterator[Live]:
    """The standard app (no MCP, console on), shared by the tests that need no special setup."""
    yield from serve_standard_app(mcp=False)


@pytest.fixture(scope="module")
def both() -> Iterator[Live]:
    """The standard app with MCP mounted at ``/mcp`` beside REST, one per test module."""
    yield from serve_standard_app()


@pytest.fixture
def agent(live: Live) -> Iterator[httpx.Client]:
    with live.client("agent-token") as client:
        yield client


@pytest.fixture
def approver(live: Live) -> Iterator[httpx.Client]:
    with live.client("approver-token") as client:
        yield client


@pytest.fixture
def anonymous(live: Live) -> Iterator[httpx.Client]:
    with live.client() as client:
        yield client


@pytest.fixture
def lab_client(live: Live) -> Iterator[httpx.Client]:
    with live.client("lab-token") as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's headless Chromium, driven by Playwright (the console tests)."""
    from playwright.sync_api import expect, sync_playwright  # only the browser tests need it

    # `expect` has a wait of its own (5 s by default): the pages' 10 s, since these tests run
    # beside the rest of the suite on a machine that may be busy.
    expect.set_options(timeout=10_000)
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page in a 1280x860 window, waiting at most 10 s for anything."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()
