"""`charter serve`'s limits: what one connection, one request and one principal may hold.

Each option's default and the reason for it are in docs/operations.md; the values here
are the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

__all__ = (
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEAD_TIMEOUT",
    "DEFAULT_KEEP_ALIVE_TIMEOUT",
    "DEFAULT_MAX_HEADER_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSIONS_PER_PRINCIPAL",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "RESERVED_DESCRIPTORS",
    "BodyTimeoutOption",
    "HeadTimeoutOption",
    "KeepAliveTimeoutOption",
    "LimitConcurrencyOption",
    "MaxConnectionsOption",
    "MaxHeaderBytesOption",
    "McpIdleTimeoutOption",
    "McpMaxSessionsOption",
    "McpSessionsOption",
    "RequestStateKeyOption",
    "ServeLimits",
    "default_max_connections",
)

LIMITS = "Limits"
"""The ``--help`` panel these options are listed under."""

DEFAULT_HEAD_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_KEEP_ALIVE_TIMEOUT = 5
DEFAULT_MAX_HEADER_BYTES = 16 * 1024
DEFAULT_SESSIONS_PER_PRINCIPAL = 16
DEFAULT_SESSION_IDLE_TIMEOUT = 300.0
DEFAULT_MAX_SESSIONS = 10_000
"""The three MCP session defaults are ``charter.mcp.SessionLimits``'s (a test holds them equal)."""
RESERVED_DESCRIPTORS = 128
"""File descriptors kept out of ``--max-connections``' default: the store's connections
and files, the listening socket, logs, and imports."""

HeadTimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout-header",
        min=0.001,
        help="Seconds a client has to send a complete request head; then 408 and close.",
        rich_help_panel=LIMITS,
    ),
]
BodyTimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout-body",
        min=0.001,
        help="Seconds a request body may take to arrive after its head; then 408 and close.",
        rich_help_panel=LIMITS,
    ),
]
KeepAliveTimeoutOption = Annotated[
    int,
    typer.Option(
        "--timeout-keep-alive",
        min=1,
        help="Seconds an idle keep-alive connection stays open between requests (uvicorn's).",
        rich_help_panel=LIMITS,
    ),
]
MaxConnectionsOption = Annotated[
    int | None,
    typer.Option(
        "--max-connections",
        min=1,
        help="Open connections at most; past it a new one gets 503 and is closed at once. "
        f"Default: the open-file limit minus {RESERVED_DESCRIPTORS}.",
        show_default=False,
        rich_help_panel=LIMITS,
    ),
]
LimitConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--limit-concurrency",
        min=1,
        help="Answer 503 while this many connections or requests are open (uvicorn's). "
        "Default: off (--max-connections already bounds them).",
        show_default=False,
        rich_help_panel=LIMITS,
    ),
]
MaxHeaderBytesOption = Annotated[
    int,
    typer.Option(
        "--max-header-bytes",
        min=1024,
        help="Largest request head in bytes; a larger one gets 400 (h11's limit).",
        rich_help_panel=LIMITS,
    ),
]
McpSessionsOption = Annotated[
    int,
    typer.Option(
        "--mcp-sessions-per-principal",
        min=0,
        help="MCP sessions one principal may hold; opening one more closes its oldest. 0: no cap.",
        rich_help_panel=LIMITS,
    ),
]
McpIdleTimeoutOption = Annotated[
    float,
    typer.Option(
        "--mcp-session-idle-timeout",
        min=0,
        help="Seconds an MCP session may go without a request in flight before it is "
        "closed. 0: never.",
        rich_help_panel=LIMITS,
    ),
]
McpMaxSessionsOption = Annotated[
    int,
    typer.Option(
        "--mcp-max-sessions",
        min=0,
        help="MCP sessions for the whole server; past it a new one gets 503. 0: no limit.",
        rich_help_panel=LIMITS,
    ),
]
RequestStateKeyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--request-state-key",
        envvar="CHARTER_REQUEST_STATE_KEYS",
        help="A secret (32+ bytes) sealing MCP elicitation state; repeatable, the first "
        "seals and all unseal (rotation); the variable holds them space-separated. "
        "Default: one kept in the store, shared by every replica on it.",
        show_default=False,
    ),
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ServeLimits:
    """What `charter serve` lets connections and requests hold, as the options say."""

    head_timeout: float = DEFAULT_HEAD_TIMEOUT
    """Seconds to wait for a complete request head (charter's guard)."""
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    """Seconds to wait for a request body after its head (``create_app(body_timeout=)``)."""
    keep_alive_timeout: int = DEFAULT_KEEP_ALIVE_TIMEOUT
    """uvicorn's ``timeout_keep_alive``."""
    max_connections: int | None = None
    """Open connections at most (charter's guard); None: ``default_max_connections()``."""
    limit_concurrency: int | None = None
    """uvicorn's ``limit_concurrency``."""
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    """uvicorn's ``h11_max_incomplete_event_size``."""

    def connections(self) -> int:
        """The connection cap in force."""
        return self.max_connections or default_max_connections()


def default_max_connections() -> int:
    """The open-file limit (soft) minus ``RESERVED_DESCRIPTORS``, and at least 16."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return 1024 - RESERVED_DESCRIPTORS
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 65536
    return max(16, soft - RESERVED_DESCRIPTORS)
