"""Fixtures for the MCP transport tests (the parts live in ``mcp_support``)."""

from __future__ import annotations

import pytest
from mcp.server.lowlevel import Server
from mcp_support import ALICE, PRESENTERS, Probe, build_host

from charter.host import Host
from charter.mcp import ConnectionState, create_server


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def host(probe: Probe) -> Host:
    return build_host(probe)


@pytest.fixture
def server(host: Host) -> Server[ConnectionState]:
    """The server as stdio would run it: every call is ALICE's."""
    return create_server(host, principal=ALICE, presenters=PRESENTERS)


@pytest.fixture(params=["legacy", "auto"], ids=["handshake-era", "2026-07-28"])
def mode(request: pytest.FixtureRequest) -> str:
    """Both protocol eras the SDK client speaks in memory."""
    return str(request.param)
