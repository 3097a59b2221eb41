"""Print the travel demo's API keys, creating them (and the database) on first run.

    python -m examples.travel                        # every demo key, with its role
    python -m examples.travel --key traveller-agent  # one key: export AGENT_KEY=$(...)

The database is ``--db``, else ``$CHARTER_DB``, else the SQLite file ``charter serve``
uses by default (``.charter/charter.db``); the keys file is ``$CHARTER_DEMO_KEYS``, else
``.charter/demo-keys.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from charter.store import SqlStore

from .app import DEMO_PRINCIPALS, demo_keys_file, ensure_demo_keys

DEFAULT_DB = "sqlite+aiosqlite:///.charter/charter.db"


async def demo_keys(url: str) -> list[dict[str, Any]]:
    """The demo keys, created in the database at ``url`` if they are not there yet."""
    if url == DEFAULT_DB:
        Path(".charter").mkdir(exist_ok=True)
    async with SqlStore(url) as store:
        return await ensure_demo_keys(store)


def main(argv: list[str] | None = None) -> int:
    """Print the keys; returns the exit status."""
    roles = [spec["role"] for spec in DEMO_PRINCIPALS]
    parser = argparse.ArgumentParser(prog="python -m examples.travel", description=__doc__)
    parser.add_argument("--key", choices=roles, help="print only this role's key")
    parser.add_argument("--db", default=os.environ.get("CHARTER_DB") or DEFAULT_DB)
    options = parser.parse_args(argv)
    keys = asyncio.run(demo_keys(options.db))
    if options.key is not None:
        print(next(k["key"] for k in keys if k["role"] == options.key))
        return 0
    print(f"Demo API keys (kept in {demo_keys_file()}):\n")
    for key in keys:
        print(f"  {key['role']:<16} {key['subject']} in tenant {key['tenant_id']}")
        print(f"  {'':<16} scopes: {' '.join(key['scopes'])}")
        print(f"  {'':<16} {key['key']}\n")
    print("Use one in another terminal, e.g.:")
    print("  export AGENT_KEY=$(.venv/bin/python -m examples.travel --key traveller-agent)")
    # The variable charter's CLI reads for --key, which `charter serve`'s hints name too.
    print("  export CHARTER_KEY=$AGENT_KEY  # the key charter's CLI and serve's hints use")
    return 0


if __name__ == "__main__":
    sys.exit(main())
