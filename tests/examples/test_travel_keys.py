"""`python -m examples.travel`, which `make run` runs first: the demo keys, how to use one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from travel_support import ROOT

from charter.cli._common import KeyOption

pytestmark = pytest.mark.slow


def test_the_printed_exports_set_the_key_variable_charters_cli_reads(tmp_path: Path) -> None:
    # `charter serve` then prints hints with $CHARTER_KEY; a newcomer who ran only the
    # demo's `export AGENT_KEY=...` got 401 "The credentials are empty" from them.
    env = {
        **os.environ,
        "CHARTER_DB": f"sqlite+aiosqlite:///{tmp_path / 'charter.db'}",
        "CHARTER_DEMO_KEYS": str(tmp_path / "keys.json"),
    }
    env.pop("CHARTER_KEY", None)

    def output(*argv: str) -> str:
        run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        return run.stdout

    printed = output(sys.executable, "-m", "examples.travel")
    exports = [line.strip() for line in printed.splitlines() if line.strip().startswith("export ")]
    assert exports, printed
    (cli_variable,) = [m.envvar for m in KeyOption.__metadata__]  # type: ignore[attr-defined]
    script = "\n".join([*exports, f'printf %s "${cli_variable}"'])
    script = script.replace(".venv/bin/python", sys.executable)
    value = output("bash", "-c", script)
    agent_key = re.search(r"traveller-agent .*?\n\s+scopes: .*?\n\s+(\S+)", printed)
    assert agent_key is not None, printed
    assert value == agent_key.group(1)
    # The keys' file is its owner's alone, as the database is.
    assert (tmp_path / "keys.json").stat().st_mode & 0o777 == 0o600
