"""Constants and builders the tests share, so that one change of the contract is one edit.

Import them as ``from tests.builders import WRITE_RISK``; a folder's own support module
(``tests/battery/battery_support.py``, ``tests/store/store_records.py``) holds what only
that folder builds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, SecretStr

from charter.policy import ActionPolicy
from charter.risk import RiskPolicy, RiskTier, SideEffect
from charter.tool import Tool, define_tool

if TYPE_CHECKING:
    import httpx2
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from mcp.client import Client


def risk(
    *side_effects: SideEffect, destructive: bool = False, reversible: bool = True, **options: Any
) -> RiskPolicy:
    """A risk policy with no dry run: by default a write that can be undone."""
    options.update(destructive=destructive, reversible=reversible, side_effects=side_effects)
    return RiskPolicy(dry_run_supported=False, **options)


def destructive_risk(*side_effects: SideEffect) -> RiskPolicy:
    """The risk policy of a write that cannot be undone."""
    return risk(*side_effects, destructive=True, reversible=False)


WRITE_RISK = risk()
"""A write that can be undone: ledgered, no approval needed by its risk alone."""

DESTRUCTIVE_RISK = destructive_risk()
"""A write that cannot be undone."""


def tiered_tool(
    name: str,
    tier: RiskTier | str,
    handler: Callable[..., Any],
    input_schema: type[BaseModel],
    output_schema: type[BaseModel],
    **options: Any,
) -> Tool[Any, Any, Any]:
    """A tool at ``tier`` (a write gets ``WRITE_RISK`` unless ``options`` give a risk policy)."""
    tier = RiskTier(tier)
    if tier is not RiskTier.READ:
        options.setdefault("risk_policy", WRITE_RISK)
    options.setdefault("description", f"The {name} tool.")
    options.update(input_schema=input_schema, output_schema=output_schema)
    return define_tool(name=name, tier=tier, handler=handler, **options)


def booking_policy(**gates: Any) -> ActionPolicy:
    """The action policy of a tool acting on the booking its command's ``booking_id`` names."""
    return ActionPolicy(target_type="booking", command_target_field="booking_id", **gates)


class HiddenPayout(BaseModel):
    """A payout whose input a ``model_dump`` does not show in full: the fingerprint must."""

    iban: SecretStr
    """Dumped as ``"**********"``."""
    amount: int
    memo: str = Field(default="", exclude=True)
    """Left out of every dump."""
    tags: frozenset[str] = frozenset()
    """Dumped in hash order, which ``PYTHONHASHSEED`` changes per process."""


def request_id() -> str:
    """A fresh request id (a random UUID), as a client makes one per intended action."""
    return str(uuid.uuid4())


def controls(request_id: str, **more: Any) -> dict[str, Any]:
    """The ``_charter`` controls argument of a ledgered call: its request id and ``more``."""
    return {"_charter": {"requestId": request_id, **more}}


class Clock:
    """A host's or store's clock that moves only when the test moves it (by default it
    starts at the real time, which signatures and expiries may need)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start if start is not None else datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, by: timedelta) -> None:
        self.now += by


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
"""The headers a raw streamable HTTP request to /mcp needs."""

MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
"""A raw JSON-RPC initialize request (handshake era), for tests that post to /mcp by hand."""

MCP_PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
"""A raw JSON-RPC ping, the request after ``MCP_INITIALIZE``."""


@asynccontextmanager
async def mcp_http_client(
    endpoint: str,
    token: str | None = None,
    *,
    timeout: float | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """The MCP SDK's ``Client`` (``options`` go to it) over streamable HTTP at ``endpoint``
    (the ``/mcp`` URL), sending ``token`` as a bearer unless it is None. HTTP waits 10 s, 30 s
    for a read, unless ``timeout`` says otherwise; ``transport`` replaces the network's."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    wait = httpx2.Timeout(10, read=30) if timeout is None else httpx2.Timeout(timeout)
    async with httpx2.AsyncClient(headers=headers, timeout=wait, transport=transport) as http:
        async with Client(streamable_http_client(endpoint, http_client=http), **options) as client:
            yield client


ROOT = Path(__file__).resolve().parents[1]
"""The repository's root."""


def run_example(module: str) -> list[str]:
    """The lines an example (``examples.quickstart``) prints, run from the root; it must exit 0."""
    result = subprocess.run(
        [sys.executable, "-m", module], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def packages_loaded_by(modules: str, packages: Iterable[str]) -> list[str]:
    """Which of ``packages`` (top-level names) a fresh interpreter has loaded once it ran
    ``import {modules}``, sorted: an import must not pull in what it does not need."""
    code = (
        f"import json, sys; import {modules}; "
        "print(json.dumps(sorted({name.partition('.')[0] for name in sys.modules} "
        f"& {set(packages)!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    loaded: list[str] = json.loads(result.stdout)
    return loaded


@cache
def fake_tool_model() -> type[GenericFakeChatModel]:
    """LangChain's fake chat model, accepting ``bind_tools`` (the agent binds its tools).

    LangChain is imported on the first call, not when this module is: importing it costs a
    test process nearly a second of CPU.
    """
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class FakeToolModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolModel:
            return self

    return FakeToolModel
