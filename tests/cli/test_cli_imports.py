"""What a `charter` command loads: one that talks HTTP to a server loads no server stack.

Each `charter` run is a fresh interpreter, so every module it imports is CPU a user (and
the suite) pays per command: importing the host, the store or the transports costs
`charter call --url` about 0.2 s of CPU it does not need.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SERVER_STACK = ("alembic", "mcp", "sqlalchemy", "starlette", "uvicorn")
"""Libraries only `charter serve` and the local (--db) commands need."""

LOCAL_PARTS = ("charter.host", "charter.http", "charter.ledger", "charter.mcp", "charter.store")
"""charter's own modules for running tools here rather than on a server."""

_RUN = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["charter", *json.loads(sys.argv[1])]
from charter.cli import main
main()
"""


def modules_loaded_by(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`charter ARGS…` in a fresh interpreter: what it did, and every module it imported."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN, json.dumps(args)], capture_output=True, text=True, timeout=60
    )
    loaded: list[str] = json.loads(done.stderr.splitlines()[-1])
    return done, set(loaded)


def unneeded(loaded: set[str]) -> list[str]:
    """The server-stack packages and local parts among ``loaded``."""
    return sorted(
        name
        for name in loaded
        if name.partition(".")[0] in SERVER_STACK
        or any(name == part or name.startswith(f"{part}.") for part in LOCAL_PARTS)
    )


def test_call_help_loads_no_server_stack() -> None:
    done, loaded = modules_loaded_by("call", "--help")
    assert done.returncode == 0, done.stderr
    assert unneeded(loaded) == []


@pytest.mark.parametrize(
    ("command", "key"),
    [
        (("call", "notes.echo", "--args", '{"text": "hi"}'), "writer-token"),
        (("tools",), "writer-token"),
        (("approvals", "list"), "approver-token"),
    ],
    ids=["call", "tools", "approvals"],
)
def test_commands_over_url_load_no_server_stack(
    notes_url: str, command: tuple[str, ...], key: str
) -> None:
    done, loaded = modules_loaded_by(*command, "--url", notes_url, "--key", key)
    assert done.returncode == 0, done.stderr
    assert unneeded(loaded) == []
