"""The `charter` command (the `cli` extra: Typer and Rich).

Each command maps its arguments onto library calls and renders the result; the logic
lives in the library (`charter.evolution`, `charter.host`, `charter.store`,
`charter.http`). Commands that need more than the `cli` extra import it when they run, so
`charter diff` works without a database driver or a web server installed.

One module per command group:

- `serve`: `charter serve`, REST, MCP and the console on one port, or MCP over stdio
  (its limits in `_serve_options`).
- `tools`: `charter tools` and `charter call`, locally or on a server with `--url`.
- `approvals`: `charter approvals list|show|grant|deny`.
- `store`: `charter keys …` and `charter db …`, the store administered.
- `diff`: `charter diff` and `charter lock`, contract evolution.

and the helpers they share: `_app` (the Typer app and `main`), `_common` (exit codes,
options, one-line errors), `_host` (opening a TARGET as a host on a store), `_remote`
(talking to a running server) and `_outcome` (printing an outcome).

Exit status: 0 success; 1 the check failed, or the call failed; 2 the input could not be
used (one line on stderr; `--debug` shows the traceback); 3 the call waits for a person
(confirmation, approval) or continues elsewhere; 4 a person refused the call or its
approval expired (final for that request id).
"""

from __future__ import annotations

from charter.cli._app import app, main

__all__ = ("app", "main")
