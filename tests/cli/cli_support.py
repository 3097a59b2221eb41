"""Test support for the `charter` command: running it in process, targets, a live server."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from notes_tools import Note, echo
from pydantic import BaseModel
from tests.builders import destructive_risk
from tests.store.conftest import seed_migrated_sqlite
from typer.testing import CliRunner, Result

from charter import Principal, Registry, tool
from charter.auth import StaticAuthenticator
from charter.cli import app
from charter.host import Host
from live_server import serve as serve  # re-exported for this package's tests
from live_server import sqlite_file

# examples/ is not installed: `python -m pytest` (make test) has the repo root on sys.path,
# a bare `pytest` does not. The `charter` command itself adds its working directory.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Settings a developer's shell may carry must not change what the commands do here.
CLEAN_ENV: dict[str, str | None] = {
    "CHARTER_DB": None,
    "CHARTER_KEY": None,
    "CHARTER_PRINCIPAL_KEY": None,
}


def charter(*args: str, env: Mapping[str, str] | None = None) -> Result:
    """Run `charter ARGS…` in this process and return what it printed and its exit code."""
    return CliRunner().invoke(app, list(args), env={**CLEAN_ENV, **(env or {})})


def error_line(result: Result) -> str:
    """The one line a failed command printed on stderr (asserting it is one line)."""
    lines = result.stderr.rstrip("\n").splitlines()
    assert len(lines) == 1, repr(result.stderr)
    assert "Traceback" not in result.output
    return lines[0]


def usage_error(result: Result) -> str:
    """The one line of a command refused as misused: exit code 2 (asserted) and no traceback."""
    assert result.exit_code == 2
    return error_line(result)


def create_key(db: str, tenant: str, subject: str, *scopes: str) -> str:
    """`charter keys create` in ``db`` for ``tenant``/``subject`` with ``scopes``; the key.

    A SQLite ``db`` not created yet starts at head (a copy): these tests are not about
    migrating it, which costs a command about 70 ms of CPU.
    """
    database = sqlite_file(db, Path.cwd())
    if database is not None:
        seed_migrated_sqlite(database)
    scope_args = [arg for scope in scopes for arg in ("--scope", scope)]
    identity = ("--tenant", tenant, "--subject", subject)
    result = charter("keys", "create", "--db", db, *identity, *scope_args, "--json")
    assert result.exit_code == 0, result.output
    key: str = json.loads(result.stdout)["key"]
    return key


def sqlite(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def demo_keys(path: Path) -> dict[str, str]:
    """The travel example's demo keys by role, from its keys file."""
    return {k["role"]: k["key"] for k in json.loads(path.read_text())}


@dataclass
class TravelFiles:
    """Where a test's travel example keeps its database and demo keys."""

    db: str
    keys_file: Path

    @property
    def env(self) -> dict[str, str]:
        return {"CHARTER_DEMO_KEYS": str(self.keys_file)}

    def run(self, command: str, *args: str) -> Result:
        """``charter COMMAND examples.travel:host ARGS --db DB`` with the demo keys' file."""
        return charter(command, "examples.travel:host", *args, "--db", self.db, env=self.env)

    def keys(self) -> dict[str, str]:
        """The demo keys by role (created by the first command that builds the host)."""
        if not self.keys_file.exists():
            result = self.run("tools")
            assert result.exit_code == 0, result.output
        return demo_keys(self.keys_file)


# -- a small host for --url tests ---------------------------------------------------------


class Wiped(BaseModel):
    wiped: bool


@tool(
    tier="destructive",
    name="notes.wipe",
    required_scopes=["notes:wipe"],
    risk_policy=destructive_risk("data-delete"),
)
def wipe(args: Note) -> Wiped:
    """Wipe a note; a person must approve it first."""
    return Wiped(wiped=True)


WRITER = Principal(
    subject="writer", tenant_id="acme", scopes=frozenset({"notes:read", "notes:wipe"})
)
APPROVER = Principal(subject="ana", tenant_id="acme", scopes=frozenset({"charter:approve"}))
TOKENS = {"writer-token": WRITER, "approver-token": APPROVER}


def notes_host() -> Host:
    """A host with an in-memory ledger and fixed tokens (no database)."""
    registry = Registry()
    registry.register_all([echo, wipe])
    return Host(registry, authenticator=StaticAuthenticator(TOKENS))


def parse(result: Result) -> Any:
    """The JSON a command printed on stdout."""
    return json.loads(result.stdout)
