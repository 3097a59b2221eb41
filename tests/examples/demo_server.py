"""`make run`'s server for tests: `charter serve examples.travel:host` in a subprocess on
a free port of 127.0.0.1, with a temporary SQLite database (a copy of one at head: the
migrations cost each start 0.4 s of CPU) and demo keys file."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from tests.store.conftest import seed_migrated_sqlite
from travel_support import ROOT

from live_server import die_with_parent, interrupt

CHARTER = str(Path(sys.executable).with_name("charter"))
STARTUP_SECONDS = 90.0
"""Importing the MCP SDK alone takes seconds on a busy CI machine."""


@dataclass
class Server:
    """The running server: where it listens, its demo keys, and its files."""

    url: str
    db: str
    keys: dict[str, str]
    env: dict[str, str]
    stderr: Path

    def headers(self, role: str, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[role]}", **extra}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_demo(tmp: Path) -> Iterator[Server]:
    """`charter serve examples.travel:host` as `make run` starts it, on a free port; its
    output (the banner, then uvicorn's access log) goes to files in ``tmp``, never to a
    pipe nobody reads, so a long run cannot fill it and stall the server."""
    port = free_port()
    env = {**os.environ, "CHARTER_DEMO_KEYS": str(tmp / "keys.json")}
    for name in ("CHARTER_DB", "CHARTER_KEY", "CHARTER_PRINCIPAL_KEY"):
        env.pop(name, None)
    db = f"sqlite+aiosqlite:///{tmp / 'c.db'}"
    seed_migrated_sqlite(tmp / "c.db")  # the migrations on a first start: tests/cli
    command = [CHARTER, "serve", "examples.travel:host", "--port", str(port), "--db", db]
    with (tmp / "stdout").open("w") as out, (tmp / "stderr").open("w") as err:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=err, preexec_fn=die_with_parent
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(process, url, tmp / "stderr")
        keys = {k["role"]: k["key"] for k in json.loads((tmp / "keys.json").read_text())}
        yield Server(url=url, db=db, keys=keys, env=env, stderr=tmp / "stderr")
    finally:
        code = interrupt(process)
    banner = (tmp / "stdout").read_text()
    log = (tmp / "stderr").read_text()
    assert code == 0, log
    assert "Traceback" not in log
    assert f"REST     {url}/v1/tools" in banner and f"MCP      {url}/mcp" in banner


def wait_until_healthy(process: subprocess.Popen[bytes], url: str, stderr: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"charter serve exited with {process.returncode}:\n{stderr.read_text()}"
            )
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)  # polling a process we do not control; there is no event to wait on
    raise RuntimeError(f"charter serve did not answer /healthz:\n{stderr.read_text()}")
