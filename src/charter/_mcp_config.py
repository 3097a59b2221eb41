"""What serving MCP over HTTP needs of ``charter.mcp`` before it builds anything.

``charter.mcp`` imports the MCP SDK (about half a second of CPU); ``charter.http`` builds
the ``/mcp`` endpoint only on its first request, and ``charter serve`` reads its options
before that. Both need the session limits and the tool name the MCP adapter reserves,
so those live here, importable without the SDK; ``charter.mcp`` re-exports them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import ConfigurationError

if TYPE_CHECKING:
    from .registry import Registry

__all__ = (
    "MIN_STATE_KEY_BYTES",
    "STATUS_TOOL",
    "SessionLimits",
    "check_request_state_keys",
    "check_reserved_names",
)

STATUS_TOOL = "charter.action_status"
"""The adapter's own tool that reports where a ledgered request stands."""


def check_reserved_names(registry: Registry) -> None:
    """Refuse a registry that holds a tool under the MCP adapter's reserved name.

    Raises:
        ConfigurationError: a registered tool is named ``STATUS_TOOL``.
    """
    if registry.get(STATUS_TOOL) is not None:
        raise ConfigurationError(f"the tool name {STATUS_TOOL!r} is reserved by charter.mcp")


MIN_STATE_KEY_BYTES = 32
"""The shortest secret the SDK takes to seal MCP ``requestState`` (AES-GCM, key derived)."""


def check_request_state_keys(keys: Sequence[bytes | str] | None) -> None:
    """Refuse request-state keys the SDK would refuse when it builds the endpoint.

    The endpoint is built on its first request; a key it cannot use is a configuration
    error of the app, so it is refused when the app is made, not as a 500 later.

    Raises:
        ConfigurationError: a key is not bytes or str, is shorter than
            ``MIN_STATE_KEY_BYTES``, or repeats an earlier one.
    """
    seen: set[bytes] = set()
    for index, key in enumerate(keys or ()):
        if not isinstance(key, bytes | str):
            raise ConfigurationError(
                f"request-state keys must be bytes or str; key {index} is {type(key).__name__}"
            )
        material = key.encode() if isinstance(key, str) else key
        if len(material) < MIN_STATE_KEY_BYTES:
            raise ConfigurationError(
                f"request-state key {index} is {len(material)} bytes; it takes at least "
                f"{MIN_STATE_KEY_BYTES} bytes of secret randomness: "
                'python -c "import secrets; print(secrets.token_hex(32))"'
            )
        if material in seen:
            raise ConfigurationError(f"request-state key {index} repeats an earlier key")
        seen.add(material)


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionLimits:
    """How many stateful MCP sessions a server keeps, and for how long.

    Unused with ``stateless=True``, where there are no sessions.
    """

    per_principal: int | None = 16
    """Open sessions one principal, (home tenant, subject), may hold; opening one more
    closes its oldest. Anonymous callers count as one principal. None: no cap."""

    idle_timeout: float | None = 300.0
    """Seconds a session may go without a request in flight (an open ``GET`` stream
    counts) before it is closed; the client then gets ``404`` and opens a new one. None:
    sessions live until the client deletes them."""

    max_sessions: int | None = 10_000
    """Sessions for the whole server (the SDK's ``max_sessions``): while that many are
    open, a request that would open another is answered ``503``. None: no limit."""

    def __post_init__(self) -> None:
        for name in ("per_principal", "max_sessions"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ConfigurationError(
                    f"SessionLimits.{name} must be a positive number of sessions or None, "
                    f"not {value!r}"
                )
        timeout = self.idle_timeout
        if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
            raise ConfigurationError(
                "SessionLimits.idle_timeout must be a positive, finite number of seconds or "
                f"None, not {timeout!r}"
            )
