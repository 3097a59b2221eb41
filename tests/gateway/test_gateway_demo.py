"""`make run-gateway`, step by step: the travel demo's keys, the gateway demo's folder, file
and agent key, then `charter serve examples.travel:host --upstreams`, used with the key
the demo printed over MCP and REST; and the target itself, stopped as Ctrl-C stops it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import mcp.types as types
import pytest
from tests.builders import mcp_http_client

from live_server import charter_serve, die_with_parent

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT)}
KEY = re.compile(r"^\s+(chk_\S+)$", re.MULTILINE)


def run_example(module: str, *args: str, cwd: Path) -> str:
    """``python -m MODULE ARGS`` as the Makefile runs it (the default store, in ``cwd``)."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env={**_without_store_settings(), **ENV},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _without_store_settings() -> dict[str, str]:
    """This environment without the variables that would move the demo's store or keys."""
    unset = ("CHARTER_DB", "CHARTER_DEMO_KEYS")
    return {name: value for name, value in os.environ.items() if name not in unset}


@pytest.mark.anyio
async def test_make_run_gateway_serves_the_demo_and_the_filesystem_server_with_the_printed_key(
    npm_servers: dict[str, Path], tmp_path: Path
) -> None:
    run_example("examples.travel", cwd=tmp_path)
    printed = run_example("examples.gateway", str(tmp_path / "demo"), cwd=tmp_path)
    [agent] = KEY.findall(printed)
    upstreams = tmp_path / "demo" / "upstreams.toml"
    note = tmp_path / "demo" / "files" / "itinerary.md"
    assert note.is_file()

    with charter_serve(
        "examples.travel:host", "--upstreams", str(upstreams), cwd=tmp_path, env=ENV
    ) as served:
        headers = {"Authorization": f"Bearer {agent}"}
        async with mcp_http_client(served.url + "/mcp", agent, timeout=60) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            read = await client.call_tool("fs.read_text_file", {"path": str(note)})
        # The demo's own tools and the upstream's, side by side; move_file is hidden.
        assert {"catalog.ping", "fs.read_text_file", "fs.write_file"} <= names
        assert "fs.move_file" not in names
        assert read.is_error is False
        assert read.content == [types.TextContent(type="text", text=note.read_text())]

        with httpx.Client(base_url=served.url, headers=headers, timeout=60) as rest:
            listed = rest.get("/v1/tools")
            assert listed.status_code == 200, listed.text
            assert "fs.list_directory" in {tool["name"] for tool in listed.json()["tools"]}
            answer = rest.post("/v1/tools/fs.read_text_file:call", json={"path": str(note)})
            assert answer.status_code == 200, answer.text
            assert answer.json()["output"]["structuredContent"] == {"content": note.read_text()}


def test_make_run_gateway_removes_its_temporary_folder_when_stopped_with_ctrl_c(
    npm_servers: dict[str, Path], tmp_path: Path
) -> None:
    # Catches a recipe that leaves its mktemp folder (the upstreams file, the served
    # files) behind every time the server is stopped.
    if subprocess.run(["make", "-q", ".venv/.installed"], cwd=ROOT, check=False).returncode:
        pytest.skip("the virtualenv is not up to date: make would rebuild it")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    environment = {
        **_without_store_settings(),
        "TMPDIR": str(temporary),  # where mktemp -d makes the folder
        "CHARTER_DB": f"sqlite+aiosqlite:///{tmp_path / 'charter.db'}",
        "CHARTER_DEMO_KEYS": str(tmp_path / "demo-keys.txt"),
    }
    with subprocess.Popen(
        ["make", "--no-print-directory", "run-gateway", "SERVE_OPTIONS=--port 0"],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        preexec_fn=die_with_parent,
    ) as make:
        try:
            assert make.stdout is not None
            rest = next((line for line in make.stdout if line.startswith("REST ")), None)
            assert rest is not None, f"make run-gateway exited with {make.wait(30)}"
            assert httpx.get(rest.split()[1], timeout=30).status_code == 200  # it serves
            [folder] = temporary.iterdir()
            assert (folder / "upstreams.toml").is_file()

            os.killpg(make.pid, signal.SIGINT)  # Ctrl-C: the whole foreground job
            make.stdout.read()
            assert make.wait(60) != 0
        finally:
            if make.poll() is None:
                os.killpg(make.pid, signal.SIGKILL)
                make.wait()
    assert list(temporary.iterdir()) == []
