"""What every transport says the same way: outcome text, scope challenges, error ids, UUIDs.

MCP results, REST problems, the CLI, the harness and the bridges each render outcomes in
their own format; the words a model or a person reads come from here, so they never
drift apart between transports.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Sequence

from .outcome import Failed

__all__ = (
    "canonical_uuid",
    "failure_text",
    "heading",
    "new_error_id",
    "scope_challenge",
    "with_next_steps",
)


def heading(code: str, message: str) -> str:
    """The first line of a result that is not the tool's output: ``[CODE] message``."""
    return f"[{code}] {message}"


def with_next_steps(first: str, next_steps: Sequence[str]) -> str:
    """``first``, then the next steps as an indented list under ``Next steps:``."""
    if not next_steps:
        return first
    return first + "\nNext steps:\n" + "\n".join(f"  - {step}" for step in next_steps)


def failure_text(failed: Failed) -> str:
    """A failure as a model reads it: its code and message, then its next steps."""
    return with_next_steps(heading(failed.code.value, failed.message), failed.next_steps)


def scope_challenge(missing: Iterable[object]) -> str:
    """The RFC 6750 challenge of a call refused for missing scopes (HTTP 403, MCP meta)."""
    scopes = " ".join(str(scope) for scope in missing)
    return f'Bearer error="insufficient_scope", scope="{scopes}"'


def new_error_id() -> str:
    """A fresh error id, ``err_`` and 16 hex digits, to name a failure in the log."""
    return "err_" + secrets.token_hex(8)


def canonical_uuid(value: object) -> str | None:
    """``value`` as a canonical lower-case UUID string, or None when it is not a UUID."""
    try:
        return str(uuid.UUID(str(value))) if isinstance(value, str | uuid.UUID) else None
    except ValueError:
        return None
