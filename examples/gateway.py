"""The travel demo in front of the official filesystem MCP server: ``make run-gateway``.

    python -m examples.gateway DIR   # install the server, write DIR/upstreams.toml, make a key

Installs ``@modelcontextprotocol/server-filesystem`` (and ``server-everything``, which the
tests use) from npm into a cache folder on first use, makes ``DIR/files`` with a note in
it, and writes ``DIR/upstreams.toml``, which serves that folder as the ``fs.*`` tools:
reads for any caller with ``files:read``; writes need ``files:write``, a confirmation and
a person's approval. It prints a new API key for an agent that may do both (in the store
``$CHARTER_DB``, else ``.charter/charter.db``). Then ``charter serve examples.travel:host
--upstreams DIR/upstreams.toml`` serves the demo's tools and the upstream's side by side.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = (
    "NPM_PACKAGES",
    "RegistryUnreachable",
    "install_npm_servers",
    "npm_cache",
    "upstreams_toml",
    "write_demo",
)

DEFAULT_DB = "sqlite+aiosqlite:///.charter/charter.db"
"""The store ``charter serve`` uses by default (``make run`` made it)."""

NPM_VERSION = "2026.8.31"
"""The servers' release (both are published from modelcontextprotocol/servers together)."""

NPM_PACKAGES = {
    "everything": f"@modelcontextprotocol/server-everything@{NPM_VERSION}",
    "filesystem": f"@modelcontextprotocol/server-filesystem@{NPM_VERSION}",
}
"""The upstream servers the demo and the tests run, by short name."""


class RegistryUnreachable(RuntimeError):
    """npm is missing, or the npm registry could not be reached to install the servers."""


def npm_cache() -> Path:
    """Where the servers are installed: ``$CHARTER_UPSTREAMS_CACHE``, else the user's cache."""
    configured = os.environ.get("CHARTER_UPSTREAMS_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "charter" / f"mcp-upstreams-{NPM_VERSION}"


def install_npm_servers() -> dict[str, Path]:
    """The entry script of each server in ``NPM_PACKAGES``, installing them if needed.

    Raises:
        RegistryUnreachable: npm is not installed, or ``npm install`` failed.
    """
    cache = npm_cache()
    scripts = {
        name: cache / "node_modules" / spec.rpartition("@")[0] / "dist" / "index.js"
        for name, spec in NPM_PACKAGES.items()
    }
    if all(script.is_file() for script in scripts.values()):
        return scripts
    npm = shutil.which("npm")
    if npm is None:
        raise RegistryUnreachable("npm is not installed (Node 20 or later is needed)")
    cache.mkdir(parents=True, exist_ok=True)
    print(f"Installing {', '.join(NPM_PACKAGES.values())} into {cache}", file=sys.stderr)
    done = subprocess.run(
        [
            *(npm, "install", "--prefix", str(cache)),
            *("--no-audit", "--no-fund", "--loglevel=error"),
            *NPM_PACKAGES.values(),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 or not all(script.is_file() for script in scripts.values()):
        raise RegistryUnreachable(f"npm install failed: {done.stderr.strip()[-500:]}")
    return scripts


def upstreams_toml(filesystem: Path, folder: Path) -> str:
    """The demo's gateway file: the filesystem server on ``folder`` as ``fs.*``."""
    command = json.dumps(["node", str(filesystem), str(folder)])
    return f"""\
# The official filesystem MCP server, governed by charter (docs/gateway.md).
[upstreams.fs]
command = {command}
# Tools not named below: callers need files:read, and the annotations decide the rest.
default = {{ scopes = ["files:read"] }}

[upstreams.fs.tools.write_file]
scopes = ["files:write"]
tier = "destructive"      # a confirmation and a person's approval, bound to the exact call

[upstreams.fs.tools.edit_file]
scopes = ["files:write"]
tier = "destructive"

[upstreams.fs.tools.create_directory]
scopes = ["files:write"]

[upstreams.fs.tools.move_file]
hidden = true
"""


def write_demo(directory: Path) -> Path:
    """Make ``directory/files`` and ``directory/upstreams.toml``; returns the file's path."""
    scripts = install_npm_servers()
    files = directory / "files"
    files.mkdir(parents=True, exist_ok=True)
    (files / "itinerary.md").write_text("# Lisbon\n\nFlight TP1351 on 14 March.\n")
    path = directory / "upstreams.toml"
    path.write_text(upstreams_toml(scripts["filesystem"], files.resolve()))
    return path


async def files_agent_key(url: str) -> str:
    """A new API key for an agent in tenant acme that may read and write the files."""
    from charter.store import SqlStore

    async with SqlStore(url) as store:
        secret, _ = await store.create_api_key(
            tenant_id="acme",
            subject="files-agent",
            scopes=["files:read", "files:write"],
            kind="agent",
            name="demo files-agent (make run-gateway)",
        )
    return secret


def main(argv: list[str] | None = None) -> int:
    """Write the demo's upstreams file into the folder named on the command line."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m examples.gateway DIR", file=sys.stderr)
        return 2
    try:
        path = write_demo(Path(args[0]))
    except RegistryUnreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    key = asyncio.run(files_agent_key(os.environ.get("CHARTER_DB") or DEFAULT_DB))
    print(f"Upstreams: {path} (the filesystem server on {path.parent / 'files'})")
    print(
        f"  files-agent      an agent with files:read files:write in tenant acme\n  {'':<16} {key}"
    )
    print("  Approve its fs.write_file calls in the console with the staff-approver key.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
