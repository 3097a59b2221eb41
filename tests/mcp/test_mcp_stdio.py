"""End to end over stdio: ``serve_stdio`` in a subprocess, the official MCP client."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp_support import Logs, request_id, text_of

from charter.mcp import STATUS_TOOL

pytestmark = pytest.mark.anyio

SERVER = StdioServerParameters(
    command=sys.executable,
    args=[str(Path(__file__).with_name("mcp_support.py"))],
    # mcp_support imports the tests folder's live_server and the root's tests.builders, as
    # pytest's sys.path allows.
    env={
        **get_default_environment(),
        "PYTHONPATH": os.pathsep.join(str(folder) for folder in Path(__file__).parents[1:3]),
    },
)


@asynccontextmanager
async def connect(**options: Any) -> AsyncIterator[Client]:
    async with Client(SERVER, **options) as client:
        yield client


async def test_stdio_lists_and_calls_as_the_configured_principal(mode: str) -> None:
    async with connect(mode=mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        who = await client.call_tool("whoami", {})
        denied = await client.call_tool("read_notes", {})
        renamed = await client.call_tool(
            "rename_trip", {"trip_id": "T-1", "_charter": {"requestId": request_id()}}
        )
    assert "whoami" in names and STATUS_TOOL in names and "read_notes" not in names
    assert who.structured_content == {"subject": "alice", "tenant_id": "acme"}
    assert text_of(denied).startswith("[AUTHORIZATION_DENIED]")
    assert renamed.structured_content == {"trip_id": "T-1", "status": "renamed"}


async def test_stdio_confirmation_sampling_progress_and_logs() -> None:
    logs = Logs()
    seen_progress: list[float] = []

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def model(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="42"), model="m"
        )

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen_progress.append(progress)

    async with connect(
        mode="legacy", elicitation_callback=user, sampling_callback=model, logging_callback=logs
    ) as client:
        cancelled = await client.call_tool(
            "cancel_trip", {"trip_id": "T-2", "_charter": {"requestId": request_id()}}
        )
        sampled = await client.call_tool("ask_model", {"text": "answer?"})
        await client.call_tool("count_up", {}, progress_callback=on_progress)
        await client.call_tool("chatty", {})
    assert cancelled.structured_content == {"trip_id": "T-2", "status": "cancelled"}
    assert sampled.structured_content == {"text": "42 (m)"}
    assert seen_progress == [1, 2, 3]
    assert logs.levels == ["debug", "info", "warning"]
