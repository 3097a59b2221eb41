"""Fixtures for the HTTP transport tests (the parts live in ``http_support``)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from http_support import Lab, Live, build_host, serve

from charter.http import create_app


@pytest.fixture(scope="session")
def live() -> Iterator[Live]:
    """The standard app (no MCP, console on), shared by the tests that need no special setup."""
    lab = Lab()
    host = build_host(lab)
    with serve(create_app(host, mcp=False)) as url:
        yield Live(url=url, host=host, lab=lab)


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
