"""charter in front of real third-party MCP servers: the official filesystem and everything
servers from npm, and mcp-server-time from PyPI, started by the tests over stdio.

Every call goes through a real ``Host`` and, where the wire matters, through charter's own
MCP server with the SDK's client.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from tests.builders import controls

from charter import Completed, ErrorCode, Failed, InteractionRequired, Registry, ToolOutcome
from charter.auth import Principal
from charter.context import CancelSignal
from charter.errors import ConfigurationError
from charter.gateway import (
    Backoff,
    Gateway,
    GatewayConfig,
    ToolPolicy,
    UpstreamConfig,
    load_config,
    parse_config,
)
from charter.host import CallOptions, Host
from charter.mcp import create_server

pytestmark = pytest.mark.anyio

ALICE = Principal(
    subject="alice", tenant_id="acme", scopes=frozenset({"files:read", "files:write"})
)
"""An agent's principal in tenant acme."""
BOB = Principal(subject="bob", tenant_id="acme", scopes=frozenset({"charter:approve"}))
"""A person in the same tenant who decides approvals."""
FAST = Backoff(first=0.05, most=0.2)


def fs_config(script: Path, folder: Path, **extra: Any) -> UpstreamConfig:
    return UpstreamConfig(name="fs", command=("node", str(script), str(folder)), **extra)


@asynccontextmanager
async def governed(
    *upstreams: UpstreamConfig, backoff: Backoff = FAST
) -> AsyncIterator[tuple[Host, Gateway]]:
    registry = Registry()
    async with Gateway(upstreams, registry, backoff=backoff, connect_timeout=60) as gateway:
        host = Host(registry)
        try:
            yield host, gateway
        finally:
            await host.aclose()


async def read_both_ways(
    npm_servers: dict[str, Path], files: Path, path: str
) -> tuple[types.CallToolResult, ToolOutcome]:
    """``fs.read_text_file`` of ``path`` through charter's MCP server, then ``Host.invoke``."""
    async with governed(fs_config(npm_servers["filesystem"], files)) as (host, _):
        async with Client(create_server(host, principal=ALICE)) as client:
            through = await client.call_tool("fs.read_text_file", {"path": path})
        return through, await host.invoke("fs.read_text_file", {"path": path}, ALICE)


def calls(gateway: Gateway, name: str) -> int:
    return next(h.calls for h in gateway.health() if h.name == name)


# -- listing ------------------------------------------------------------------------------------


async def test_the_filesystem_tools_are_listed_through_charters_mcp_under_the_namespace(
    npm_servers: dict[str, Path], files: Path
) -> None:
    async with governed(fs_config(npm_servers["filesystem"], files)) as (host, _):
        async with Client(create_server(host, principal=ALICE)) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        async with Client(
            StdioServerParameters(command="node", args=[str(npm_servers["filesystem"]), str(files)])
        ) as direct:
            upstream = {tool.name: tool for tool in (await direct.list_tools()).tools}

    assert {f"fs.{name}" for name in upstream} <= set(listed)
    read = listed["fs.read_text_file"]
    # The upstream's input schema, unchanged, plus the optional _charter controls.
    properties = dict(read.input_schema["properties"])
    assert properties.pop("_charter")
    assert properties == upstream["read_text_file"].input_schema["properties"]
    assert read.output_schema == upstream["read_text_file"].output_schema
    assert read.annotations is not None and read.annotations.read_only_hint is True
    # destructiveHint upstream: destructive here, behind a confirmation and an approval.
    write = listed["fs.write_file"]
    assert write.annotations is not None and write.annotations.destructive_hint is True
    contract = (write.meta or {})["charter/tool"]
    assert contract["tier"] == "destructive"
    assert contract["actionPolicy"]["approval"] == "required"
    # readOnlyHint false and no destructiveHint: a write that needs a confirmation.
    mkdir = host.registry.get("fs.create_directory")
    assert mkdir is not None and mkdir.tool.tier.value == "write"
    assert mkdir.entry["actionPolicy"]["confirmation"] == "required"


async def test_hidden_and_renamed_tools_and_a_hidden_default(
    npm_servers: dict[str, Path], files: Path
) -> None:
    config = parse_config(
        {
            "upstreams": {
                "files": {
                    "command": ["node", str(npm_servers["filesystem"]), str(files)],
                    "namespace": "docs",
                    "default": "hidden",
                    "tools": {
                        "read_text_file": {"rename": "read", "scopes": ["docs:read"]},
                        "list_directory": {},
                    },
                }
            }
        }
    )
    registry = Registry()
    async with Gateway(config, registry, backoff=FAST, connect_timeout=60):
        assert sorted(registry.names()) == ["docs.list_directory", "docs.read"]
        read = registry.get("docs.read")
        assert read is not None and read.tool.required_scopes == ("docs:read",)


async def test_two_tools_mapped_to_one_name_are_neither_served(
    npm_servers: dict[str, Path], files: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A rename onto another tool's name: which would run, and under whose policy, would
    # be the upstream's listing order. Neither runs, and the log names both.
    config = parse_config(
        {
            "upstreams": {
                "fs": {
                    "command": ["node", str(npm_servers["filesystem"]), str(files)],
                    "tools": {"write_file": {"rename": "read_text_file"}},
                }
            }
        }
    )
    registry = Registry()
    with caplog.at_level(logging.WARNING, logger="charter"):
        async with Gateway(config, registry, backoff=FAST, connect_timeout=60):
            names = registry.names()
    assert "fs.read_text_file" not in names and "fs.write_file" not in names
    assert "fs.list_directory" in names
    assert "'read_text_file', 'write_file' all map to 'fs.read_text_file'" in caplog.text


# -- calls --------------------------------------------------------------------------------------


async def test_a_read_returns_the_upstreams_result_unchanged(
    npm_servers: dict[str, Path], files: Path
) -> None:
    path = str(files / "itinerary.md")
    through, outcome = await read_both_ways(npm_servers, files, path)
    assert through.is_error is False
    assert through.content == [
        types.TextContent(type="text", text=(files / "itinerary.md").read_text())
    ]
    assert through.structured_content == {"content": (files / "itinerary.md").read_text()}
    # REST and the host see the same result as data.
    assert isinstance(outcome, Completed) and isinstance(outcome.output, dict)
    assert outcome.output["structuredContent"] == through.structured_content


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get-tiny-image", {}),
        ("get-structured-content", {"location": "New York"}),
        ("get-resource-reference", {"resourceType": "Text", "resourceId": 1}),
        ("get-resource-links", {"count": 2}),
        ("get-annotated-message", {"messageType": "error", "includeImage": True}),
        ("gzip-file-as-resource", {}),
    ],
)
async def test_every_content_type_passes_through_as_the_upstream_sent_it(
    npm_servers: dict[str, Path], tool: str, arguments: dict[str, Any]
) -> None:
    script = str(npm_servers["everything"])
    everything = UpstreamConfig(
        name="everything",
        command=("node", script, "stdio"),
        default=ToolPolicy(tier="read"),
    )
    async with governed(everything) as (host, _):
        async with Client(create_server(host, principal=ALICE)) as client:
            through = await client.call_tool(f"everything.{tool}", arguments)
    async with Client(StdioServerParameters(command="node", args=[script, "stdio"])) as direct:
        expected = await direct.call_tool(tool, arguments)
    assert through.is_error == bool(expected.is_error)
    assert untimed(through.content) == untimed(expected.content)
    assert through.structured_content == expected.structured_content


def untimed(blocks: list[types.ContentBlock]) -> str:
    """Content blocks as JSON, without the clock times the everything server writes."""
    dumped = json.dumps([b.model_dump(mode="json", exclude_none=True) for b in blocks])
    return re.sub(r"\d{1,2}:\d{2}:\d{2}( [AP]M)?", "<time>", dumped)


async def test_an_upstream_tool_error_is_returned_as_the_upstreams_error(
    npm_servers: dict[str, Path], files: Path, tmp_path: Path
) -> None:
    outside = str(tmp_path / "elsewhere.txt")
    result, outcome = await read_both_ways(npm_servers, files, outside)
    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    assert "outside allowed directories" in result.content[0].text
    # To the host (REST, the CLI, the harness) it is a failure with the upstream's words.
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.UPSTREAM_ERROR
    assert outcome.reason == "upstream_tool_error" and not outcome.retryable
    assert "outside allowed directories" in outcome.message


async def test_an_upstream_tool_error_is_ledgered_and_replayed_without_calling_again(
    npm_servers: dict[str, Path], files: Path, tmp_path: Path
) -> None:
    # create_directory is a write: confirmed, ledgered. Outside the folder, the upstream
    # runs it and answers isError.
    arguments = {"path": str(tmp_path / "elsewhere")}
    over_host, over_mcp = str(uuid.uuid4()), str(uuid.uuid4())
    async with governed(fs_config(npm_servers["filesystem"], files)) as (host, gateway):
        call = {**arguments, **controls(over_host, confirmed=True)}
        first = await host.invoke("fs.create_directory", dict(call), ALICE)
        assert calls(gateway, "fs") == 1
        replay = await host.invoke("fs.create_directory", dict(call), ALICE)
        assert calls(gateway, "fs") == 1

        async with Client(create_server(host, principal=ALICE)) as client:
            mcp_call = {**arguments, **controls(over_mcp, confirmed=True)}
            direct = await client.call_tool("fs.create_directory", mcp_call)
            again = await client.call_tool("fs.create_directory", mcp_call)
        assert calls(gateway, "fs") == 2
        stored = await host.store.get_entry("acme", "acme/alice", over_host)
    assert isinstance(first, Failed) and first.code is ErrorCode.UPSTREAM_ERROR
    assert not first.replayed and "outside allowed directories" in first.message
    result = (first.meta or {})["result"]
    assert isinstance(result, dict) and result["isError"] is True
    assert isinstance(replay, Failed) and replay.replayed
    assert (replay.code, replay.message, replay.meta) == (first.code, first.message, first.meta)
    # The ledger holds the upstream's answer as a completed call.
    assert stored is not None and stored.status == "completed"
    # Over MCP: the upstream's own error result, the first time and replayed.
    assert direct.is_error is True and again.is_error is True
    assert again.content == direct.content
    assert isinstance(direct.content[0], types.TextContent)
    assert "outside allowed directories" in direct.content[0].text
    assert (again.meta or {}).get("charter/replayed") is True


async def test_arguments_that_break_the_upstreams_schema_never_reach_it(
    npm_servers: dict[str, Path], files: Path
) -> None:
    async with governed(fs_config(npm_servers["filesystem"], files)) as (host, gateway):
        outcome = await host.invoke("fs.read_text_file", {"path": 42}, ALICE)
        missing = await host.invoke("fs.read_text_file", {}, ALICE)
        assert calls(gateway, "fs") == 0
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.INVALID_INPUT
    assert "path" in outcome.message and "42" not in outcome.message
    assert isinstance(missing, Failed) and missing.code is ErrorCode.INVALID_INPUT


# -- approvals, the ledger and replays ----------------------------------------------------------


async def test_a_write_waits_for_approval_then_reaches_the_upstream_exactly_once(
    npm_servers: dict[str, Path], files: Path
) -> None:
    target = files / "notes.txt"
    arguments = {"path": str(target), "content": "Pack sunscreen."}
    request_id = str(uuid.uuid4())
    async with governed(fs_config(npm_servers["filesystem"], files)) as (host, gateway):
        asked = await host.invoke(
            "fs.write_file", {**arguments, **controls(request_id, confirmed=True)}, ALICE
        )
        assert isinstance(asked, InteractionRequired) and asked.gate == "approval"
        approval_id = asked.approval_id
        assert approval_id is not None
        # Asking again (a retry before the decision) reaches nothing either.
        again = await host.invoke(
            "fs.write_file", {**arguments, **controls(request_id, confirmed=True)}, ALICE
        )
        assert isinstance(again, InteractionRequired) and again.approval_id == approval_id
        assert calls(gateway, "fs") == 0 and not target.exists()

        granted = await host.approvals.grant(approval_id, BOB)
        assert not isinstance(granted, Failed)
        retry = {**arguments, **controls(request_id, confirmed=True, approvalId=approval_id)}
        outcomes = []

        async def attempt() -> None:
            outcomes.append(await host.invoke("fs.write_file", dict(retry), ALICE))

        async with anyio.create_task_group() as group:
            for _ in range(16):
                group.start_soon(attempt)

        assert all(isinstance(o, Completed) for o in outcomes), outcomes
        assert sum(not o.replayed for o in outcomes if isinstance(o, Completed)) == 1
        assert calls(gateway, "fs") == 1
        assert target.read_text() == "Pack sunscreen."

        # A later replay is the stored result: the upstream is not called again.
        target.write_text("changed since")
        replay = await host.invoke("fs.write_file", dict(retry), ALICE)
        assert isinstance(replay, Completed) and replay.replayed
        assert calls(gateway, "fs") == 1 and target.read_text() == "changed since"


async def test_an_approval_binds_the_exact_upstream_arguments(
    npm_servers: dict[str, Path], files: Path
) -> None:
    target = str(files / "notes.txt")
    request_id = str(uuid.uuid4())
    async with governed(fs_config(npm_servers["filesystem"], files)) as (host, gateway):
        asked = await host.invoke(
            "fs.write_file",
            {"path": target, "content": "one", **controls(request_id, confirmed=True)},
            ALICE,
        )
        assert isinstance(asked, InteractionRequired) and asked.approval_id is not None
        await host.approvals.grant(asked.approval_id, BOB)
        other = {"path": target, "content": "something else"}
        same_id = await host.invoke(
            "fs.write_file",
            {**other, **controls(request_id, confirmed=True, approvalId=asked.approval_id)},
            ALICE,
        )
        new_id = await host.invoke(
            "fs.write_file",
            {
                **other,
                **controls(str(uuid.uuid4()), confirmed=True, approvalId=asked.approval_id),
            },
            ALICE,
        )
        assert calls(gateway, "fs") == 0
    for refused in (same_id, new_id):
        assert isinstance(refused, Failed) and refused.code is ErrorCode.AUTHORIZATION_DENIED
        assert refused.reason == "fingerprint_mismatch"
    assert not (files / "notes.txt").exists()


async def test_another_tenant_can_neither_decide_nor_use_the_approval(
    npm_servers: dict[str, Path], files: Path
) -> None:
    # The same subjects, in another tenant.
    bob_elsewhere = Principal(
        subject="bob", tenant_id="globex", scopes=frozenset({"charter:approve"})
    )
    alice_elsewhere = Principal(
        subject="alice", tenant_id="globex", scopes=frozenset({"files:read", "files:write"})
    )
    arguments = {"path": str(files / "notes.txt"), "content": "one"}
    request_id = str(uuid.uuid4())
    async with governed(fs_config(npm_servers["filesystem"], files)) as (host, gateway):
        asked = await host.invoke(
            "fs.write_file", {**arguments, **controls(request_id, confirmed=True)}, ALICE
        )
        assert isinstance(asked, InteractionRequired) and asked.approval_id is not None
        refused = await host.approvals.grant(asked.approval_id, bob_elsewhere)
        assert isinstance(refused, Failed)
        await host.approvals.grant(asked.approval_id, BOB)
        used_elsewhere = await host.invoke(
            "fs.write_file",
            {**arguments, **controls(request_id, confirmed=True, approvalId=asked.approval_id)},
            alice_elsewhere,
        )
        assert calls(gateway, "fs") == 0
    assert isinstance(used_elsewhere, Failed)
    assert used_elsewhere.code is ErrorCode.AUTHORIZATION_DENIED
    assert not (files / "notes.txt").exists()


# -- an upstream that dies ----------------------------------------------------------------------


def everything_with_pid(script: Path, pid_file: Path) -> UpstreamConfig:
    """The everything server, started through a shell that writes its pid first."""
    return UpstreamConfig(
        name="everything",
        command=("sh", "-c", f'echo $$ > "{pid_file}"; exec node "{script}" stdio'),
        default=ToolPolicy(tier="read"),
    )


async def test_an_upstream_killed_mid_call_is_provider_unavailable_and_reconnects(
    npm_servers: dict[str, Path], tmp_path: Path
) -> None:
    pid_file = tmp_path / "upstream.pid"
    started = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    name = "everything.trigger-long-running-operation"
    arguments = {"duration": 60, "steps": 60}
    async with governed(everything_with_pid(npm_servers["everything"], pid_file)) as (
        host,
        gateway,
    ):
        result: list[Any] = []

        async def long_call() -> None:
            call = CallOptions(progress_sink=progress)
            result.append(await host.invoke(name, arguments, ALICE, call=call))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(long_call)
                await started.wait()  # the upstream is running the call
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            await gateway.wait_for("everything", "connected")
        [outcome] = result
        assert isinstance(outcome, Failed)
        assert outcome.code is ErrorCode.PROVIDER_UNAVAILABLE and outcome.retryable
        # Reconnected: the same tools, and calls work again.
        after = await host.invoke("everything.echo", {"message": "back"}, ALICE)
        assert isinstance(after, Completed)
        health = {h.name: h for h in gateway.health()}["everything"]
        assert health.reconnects == 1 and health.state == "connected"


async def test_calls_to_an_upstream_that_is_down_are_provider_unavailable(
    npm_servers: dict[str, Path], tmp_path: Path
) -> None:
    pid_file = tmp_path / "upstream.pid"
    config = everything_with_pid(npm_servers["everything"], pid_file)
    async with governed(config, backoff=Backoff(first=600, most=600)) as (host, gateway):
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        with anyio.fail_after(60):
            await gateway.wait_for("everything", "down")
        outcome = await host.invoke("everything.echo", {"message": "hello"}, ALICE)
        assert calls(gateway, "everything") == 0
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.PROVIDER_UNAVAILABLE and outcome.retryable
    assert outcome.meta is not None and outcome.meta["upstream"] == "everything"


# -- a Python server from PyPI ------------------------------------------------------------------


async def test_mcp_server_time_from_pypi_through_charter() -> None:
    time = UpstreamConfig(name="time", command=(sys.executable, "-m", "mcp_server_time"))
    async with governed(time) as (host, _):
        async with Client(create_server(host, principal=ALICE)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("time.get_current_time", {"timezone": "UTC"})
    assert {"time.get_current_time", "time.convert_time"} <= names
    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["timezone"] == "UTC"


# -- streamable HTTP and configuration ------------------------------------------------------


async def test_an_upstream_over_streamable_http_with_headers_from_the_environment(
    npm_servers: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("EVERYTHING_TOKEN", "s3cret")
    remote = UpstreamConfig(
        name="remote",
        url=f"http://127.0.0.1:{port}/mcp",
        headers={"Authorization": "Bearer ${EVERYTHING_TOKEN}"},
        default=ToolPolicy(tier="read"),
    )
    server = await anyio.open_process(
        ["node", str(npm_servers["everything"]), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
    )
    try:
        registry = Registry()
        # The server may not listen yet: the gateway keeps trying, with backoff.
        async with Gateway([remote], registry, backoff=FAST, connect_timeout=0) as gateway:
            with anyio.fail_after(60):
                await gateway.wait_for("remote", "connected")
            host = Host(registry)
            outcome = await host.invoke("remote.get-sum", {"a": 2, "b": 3}, ALICE)
            assert [h.transport for h in gateway.health()] == ["http"]
    finally:
        server.terminate()
        await server.wait()
    assert isinstance(outcome, Completed) and isinstance(outcome.output, dict)
    assert "5" in json.dumps(outcome.output["content"])


async def test_a_header_naming_a_missing_variable_keeps_the_upstream_down_saying_which() -> None:
    remote = UpstreamConfig(
        name="remote",
        url="http://127.0.0.1:9/mcp",
        headers={"Authorization": "Bearer ${NOT_SET_ANYWHERE}"},
    )
    async with Gateway([remote], Registry(), backoff=Backoff(first=600, most=600)) as gateway:
        [health] = gateway.health()
    assert health.state == "down"
    assert health.last_error is not None
    assert "NOT_SET_ANYWHERE" in health.last_error and "headers" in health.last_error


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({"command": ["x"], "url": "http://h/mcp"}, "exactly one of command"),
        ({}, "exactly one of command"),
        ({"url": "ftp://h"}, "http:// or https://"),
        ({"command": ["x"], "headers": {"A": "b"}}, "headers apply to a url upstream"),
        ({"command": ["x"], "tools": {"t": {"tier": "risky"}}}, "upstreams.u.tools.t.tier"),
        ({"command": ["x"], "tools": {"t": {"scopes": "a:b"}}}, "must be a list"),
        ({"command": ["x"], "tools": {"t": {"rename": "no spaces"}}}, "letters, digits"),
        ({"command": ["x"], "namespace": "a.b"}, "namespace 'a.b'"),
        ({"command": ["x"], "colour": "blue"}, "upstreams.u.colour"),
    ],
)
def test_a_bad_upstream_table_is_a_configuration_error_that_says_where(
    table: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(problem)):
        parse_config({"upstreams": {"u": table}})


def test_two_upstreams_may_not_share_a_namespace() -> None:
    with pytest.raises(ConfigurationError, match="share the namespace 'fs'"):
        parse_config(
            {"upstreams": {"a": {"command": ["x"], "namespace": "fs"}, "fs": {"command": ["y"]}}}
        )


def test_the_toml_file_and_python_describe_the_same_upstreams(tmp_path: Path) -> None:
    path = tmp_path / "upstreams.toml"
    path.write_text(
        '[upstreams.fs]\ncommand = ["node", "server.js", "/srv"]\ndefault = "hidden"\n'
        '[upstreams.fs.tools.read_file]\nscopes = ["files:read"]\n'
    )
    in_python = UpstreamConfig(
        name="fs",
        command=("node", "server.js", "/srv"),
        default=ToolPolicy(hidden=True),
        tools={"read_file": ToolPolicy(scopes=("files:read",))},
    )
    assert load_config(path) == GatewayConfig.of(in_python)
    assert in_python.policy_for("read_file").hidden is None  # named: shown
    assert in_python.policy_for("write_file").hidden is True
    with pytest.raises(ConfigurationError, match="no such upstreams file"):
        load_config(tmp_path / "missing.toml")


async def test_an_upstreams_changed_tool_list_is_followed_in_the_registry() -> None:
    script = Path(__file__).with_name("changing_server.py")
    changing = UpstreamConfig(
        name="changing", command=(sys.executable, str(script)), default=ToolPolicy(tier="read")
    )
    async with governed(changing) as (host, gateway):
        assert sorted(host.registry.names()) == ["changing.unlock"]
        changed = anyio.Event()
        gateway.on_change(changed.set)
        unlocked = await host.invoke("changing.unlock", {}, ALICE)
        assert isinstance(unlocked, Completed)
        with anyio.fail_after(60):
            await changed.wait()
        assert sorted(host.registry.names()) == ["changing.secret", "changing.unlock"]
        told = await host.invoke("changing.secret", {}, ALICE)
    assert isinstance(told, Completed) and isinstance(told.output, dict)
    assert "swordfish" in json.dumps(told.output["content"])


async def test_charters_own_mcp_clients_are_told_when_an_upstreams_tools_change() -> None:
    script = Path(__file__).with_name("changing_server.py")
    changing = UpstreamConfig(
        name="changing", command=(sys.executable, str(script)), default=ToolPolicy(tier="read")
    )
    told = anyio.Event()

    async def on_message(message: types.ServerNotification | Exception) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    async with governed(changing) as (host, _):
        server = create_server(host, principal=ALICE)
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            before = {tool.name for tool in (await client.list_tools()).tools}
            await client.call_tool("changing.unlock", {})
            with anyio.fail_after(60):
                await told.wait()
            after = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
    assert "changing.secret" not in before
    assert "changing.secret" in after


async def test_an_upstream_password_argument_is_bound_by_the_approval_but_never_shown() -> None:
    script = Path(__file__).with_name("secret_server.py")
    vault = UpstreamConfig(
        name="vault",
        command=(sys.executable, str(script)),
        default=ToolPolicy(tier="sensitive", approval=True),
    )
    request_id = str(uuid.uuid4())
    signing_in = {"user": "ada", "password": "canary-hunter2"}
    async with governed(vault) as (host, gateway):
        asked = await host.invoke(
            "vault.sign_in", {**signing_in, **controls(request_id, confirmed=True)}, ALICE
        )
        assert isinstance(asked, InteractionRequired) and asked.approval_id is not None
        approval = await host.approvals.get(BOB, asked.approval_id)
        await host.approvals.grant(asked.approval_id, BOB)
        approved = controls(request_id, confirmed=True, approvalId=asked.approval_id)
        swapped = await host.invoke(
            "vault.sign_in", {**signing_in, "password": "another", **approved}, ALICE
        )
        done = await host.invoke("vault.sign_in", {**signing_in, **approved}, ALICE)
        assert calls(gateway, "vault") == 1
        stored = await host.store.get_entry("acme", "acme/alice", request_id)
    # The SDK marks a SecretStr parameter writeOnly: bound, never shown nor stored.
    assert approval is not None
    assert approval.arguments == {"user": "ada", "password": {"$secret": "bound"}}
    assert "canary" not in repr(asked) and "canary" not in repr(stored)
    assert isinstance(swapped, Failed) and swapped.reason == "fingerprint_mismatch"
    assert isinstance(done, Completed)
    assert "14-character password" in json.dumps(done.output)


async def test_a_write_the_upstream_did_not_answer_in_time_is_recorded_never_sent_again(
    tmp_path: Path,
) -> None:
    # The upstream may have done the work: a retry under the same requestId replays the
    # recorded "outcome unknown" instead of sending the write a second time.
    journal = tmp_path / "journal.txt"
    slow = UpstreamConfig(
        name="slow",
        command=(sys.executable, str(Path(__file__).with_name("slow_server.py"))),
        env={"JOURNAL": str(journal)},
        default=ToolPolicy(tier="write"),
        timeout=1,
    )
    request_id = str(uuid.uuid4())
    call = {"seconds": 3, **controls(request_id, confirmed=True)}
    async with governed(slow) as (host, _):
        first = await host.invoke("slow.slow_write", dict(call), ALICE)
        await anyio.sleep(2.5)  # the upstream finishes the first run meanwhile
        again = await host.invoke("slow.slow_write", dict(call), ALICE)
    assert isinstance(first, Failed) and first.code is ErrorCode.UPSTREAM_ERROR, first
    assert "[OUTCOME_UNKNOWN]" in first.message and "did not answer within 1 s" in first.message
    assert not first.retryable
    assert isinstance(again, Failed) and again.replayed and again.message == first.message
    assert journal.read_text().count("ran") == 1


def slow_upstream(journal: Path) -> UpstreamConfig:
    """``slow.slow_write`` as a write: ledgered, confirmed, its runs counted in ``journal``."""
    return UpstreamConfig(
        name="slow",
        command=(sys.executable, str(Path(__file__).with_name("slow_server.py"))),
        env={"JOURNAL": str(journal)},
        default=ToolPolicy(tier="write"),
        timeout=30,
    )


async def test_a_write_whose_caller_leaves_runs_on_and_its_retry_replays_it(
    tmp_path: Path,
) -> None:
    # The caller's cancel signal fires (a REST client that disconnected) once the write
    # was sent: the upstream may be doing it, so the call runs on and is recorded.
    journal = tmp_path / "journal.txt"
    request_id = str(uuid.uuid4())
    call = {"seconds": 1.5, **controls(request_id, confirmed=True)}
    async with governed(slow_upstream(journal)) as (host, _):
        cancel = CancelSignal()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_set_later, cancel, 0.5)
            first = await host.invoke(
                "slow.slow_write", dict(call), ALICE, call=CallOptions(cancel=cancel)
            )
        again = await host.invoke("slow.slow_write", dict(call), ALICE)
    assert cancel.is_set()
    assert isinstance(first, Completed) and isinstance(first.output, dict), first
    assert first.output["structuredContent"] == {"result": "written"}
    assert isinstance(again, Completed) and again.replayed and again.output == first.output
    assert journal.read_text().count("ran") == 1


async def test_a_write_whose_caller_is_cancelled_is_recorded_and_audited_when_it_ends(
    tmp_path: Path,
) -> None:
    # An MCP client's notifications/cancelled cancels the task that called the host: the
    # caller gets its cancellation, the write runs on, commits and is audited.
    journal = tmp_path / "journal.txt"
    request_id = str(uuid.uuid4())
    call = {"seconds": 1.5, **controls(request_id, confirmed=True)}
    async with governed(slow_upstream(journal)) as (host, _):
        with anyio.move_on_after(0.5) as waited:
            await host.invoke("slow.slow_write", dict(call), ALICE)
        assert waited.cancelled_caught
        # A retry at once waits for the call still running (the ledger holds its request
        # id), then replays what it recorded.
        again = await host.invoke("slow.slow_write", dict(call), ALICE)
        await anyio.sleep(0.1)  # the first call's audit event is recorded as it ends
        events = [e for e in await host.audit.events() if e.request_id == request_id]
    assert isinstance(again, Completed) and again.replayed, again
    assert isinstance(again.output, dict)
    assert again.output["structuredContent"] == {"result": "written"}
    assert journal.read_text().count("ran") == 1
    assert [e.outcome for e in events if not e.replayed] == ["completed"]


async def test_a_call_longer_than_the_ping_interval_keeps_its_connection(
    tmp_path: Path,
) -> None:
    # The upstream computes for 3 s without answering anything, pings included; the
    # connection is pinged every half second when idle. The call is what shows whether
    # the connection works, so it is not pinged meanwhile, and nothing is dropped.
    busy = slow_upstream(tmp_path / "journal.txt").model_copy(
        update={"default": ToolPolicy(tier="read")}
    )
    registry = Registry()
    async with Gateway([busy], registry, ping_interval=0.5, connect_timeout=60) as gateway:
        host = Host(registry)
        try:
            outcome = await host.invoke("slow.busy_read", {"seconds": 3}, ALICE)
            [health] = gateway.health()
        finally:
            await host.aclose()
    assert isinstance(outcome, Completed), outcome
    assert (health.state, health.reconnects) == ("connected", 0)


async def _set_later(signal: CancelSignal, seconds: float) -> None:
    await anyio.sleep(seconds)
    signal.set()
