"""What a `charter` command loads: one that talks HTTP to a server loads no server stack.

Each `charter` run is a fresh interpreter, so every module it imports is CPU a user (and
the suite) pays per command: importing the host, the store or the transports costs
`charter call --url` about 0.2 s of CPU it does not need.
"""

from __future__ import annotations

import json
import subprocess
import sys

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


def test_call_over_url_loads_no_server_stack(notes_url: str) -> None:
    call = ("call", "--url", notes_url, "notes.echo", "--args", '{"text": "hi"}')
    done, loaded = modules_loaded_by(*call, "--key", "writer-token")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"text": "hi"}
    assert unneeded(loaded) == []
