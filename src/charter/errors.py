"""Errors: one code vocabulary for every transport.

Exceptions have two jobs in charter; every other failure is an outcome value.

    CharterError
     ├── ToolError            raised by a handler; the host turns it into ``Failed``
     ├── ConfigurationError   a developer mistake caught before serving
     │                        (definition, registration, building a ``Host``)
     ├── StoreError           a store's database failed (statement rejected, aborted)
     │    └── StoreUnavailable  unreachable, or the connection was lost: retry the call
     └── StoreBusy            a lock was not granted within the wait: retry the call

Stores raise the store errors (``charter.store`` adds ``SchemaMismatch`` and
``UnstorableValue`` beneath them); the gate and the host answer them with retryable
outcomes, so they never reach a caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

__all__ = (
    "DEFAULT_NEXT_STEPS",
    "RETRYABLE_BY_DEFAULT",
    "UNKNOWN_TOOL_NEXT_STEPS",
    "CharterError",
    "ConfigurationError",
    "ErrorCode",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
    "ToolError",
    "coerce_code",
)


class ErrorCode(StrEnum):
    """The error codes every transport renders; finer causes go in ``meta["reason"]``."""

    NOT_FOUND = "NOT_FOUND"
    INVALID_INPUT = "INVALID_INPUT"
    INVALID_OUTPUT = "INVALID_OUTPUT"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    AUTHORIZATION_DENIED = "AUTHORIZATION_DENIED"
    CONFIRMATION_REQUIRED = "CONFIRMATION_REQUIRED"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    ACTION_POLICY_REQUIRED = "ACTION_POLICY_REQUIRED"
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    REQUEST_IN_PROGRESS = "REQUEST_IN_PROGRESS"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    MISSING_SERVICE = "MISSING_SERVICE"
    PROVIDER_ERROR = "PROVIDER_ERROR"
    PROVIDER_UNAVAILABLE = "PROVIDER_UNAVAILABLE"
    RATE_LIMITED = "RATE_LIMITED"
    UPSTREAM_ERROR = "UPSTREAM_ERROR"


#: Codes a caller may retry unchanged, when the raiser does not say otherwise.
RETRYABLE_BY_DEFAULT = frozenset(
    {
        ErrorCode.PROVIDER_UNAVAILABLE,
        ErrorCode.REQUEST_IN_PROGRESS,
        ErrorCode.TIMEOUT,
        ErrorCode.RATE_LIMITED,
    }
)

#: What to do about a call to a tool name the caller cannot see (the registry's NOT_FOUND);
#: ``DEFAULT_NEXT_STEPS[NOT_FOUND]`` is about a thing a tool did not find.
UNKNOWN_TOOL_NEXT_STEPS: tuple[str, ...] = (
    "List the available tools and call one of them by its exact name.",
)

#: Remediation a model can follow, for errors raised without explicit next steps.
DEFAULT_NEXT_STEPS: Mapping[ErrorCode, tuple[str, ...]] = {
    # A handler's "no such thing": the tool exists, what it was asked for does not.
    ErrorCode.NOT_FOUND: (
        "Check the identifiers in the arguments: find the right one (for example with a tool "
        "that lists or searches these records) and call again; do not guess identifiers.",
    ),
    ErrorCode.INVALID_INPUT: (
        "Fix the arguments listed in meta.issues so they match the tool's input schema, "
        "then call again.",
    ),
    ErrorCode.INVALID_OUTPUT: (
        "The tool produced a result that does not match its output schema; report the "
        "error id to the tool's owner. Retrying will not help.",
    ),
    ErrorCode.UNAUTHENTICATED: ("Authenticate (send valid credentials), then call again.",),
    ErrorCode.AUTHORIZATION_DENIED: (
        "Do not retry with the same credentials; ask an administrator for the missing "
        "permission or use a tool you are allowed to call.",
    ),
    ErrorCode.CONFIRMATION_REQUIRED: (
        'Ask the user to confirm, then retry the same call with "_charter": '
        '{"confirmed": true} (keep "approvalId" if you already have one).',
    ),
    ErrorCode.APPROVAL_REQUIRED: (
        "Ask an approver to grant the approval named in meta.approvalId.",
        'Then retry the same call with "_charter": {"confirmed": true, "approvalId": '
        '"<approvalId>", "requestId": "<the same requestId>"}.',
    ),
    ErrorCode.ACTION_POLICY_REQUIRED: (
        "This action cannot run without its action policy controls; check the tool's "
        "actionPolicy in discovery and supply what it requires.",
    ),
    ErrorCode.IDEMPOTENCY_CONFLICT: (
        "This requestId was already used for a different call. Use a new requestId for a "
        "new action, or repeat the original arguments exactly to get its result.",
    ),
    ErrorCode.REQUEST_IN_PROGRESS: (
        "The same request is still running; wait a moment and retry with the same requestId.",
    ),
    ErrorCode.TIMEOUT: ("The tool timed out; retry later with the same requestId.",),
    ErrorCode.CANCELLED: ("The call was cancelled; call again if the action is still wanted.",),
    ErrorCode.MISSING_SERVICE: (
        "The server is missing a service this tool needs; report it to the operator.",
    ),
    ErrorCode.PROVIDER_ERROR: (
        "The tool failed; report the error id to the operator. Retrying is unlikely to help.",
    ),
    ErrorCode.PROVIDER_UNAVAILABLE: ("A dependency is unavailable; retry later.",),
    ErrorCode.RATE_LIMITED: (
        "The caller's budget for this tool is spent; wait meta.retryAfter seconds, then "
        "retry the same call (with the same requestId).",
    ),
    ErrorCode.UPSTREAM_ERROR: (
        "The upstream server ran the call and reported an error (its result is in "
        "meta.result). Read it, fix the call and make a new request with a new requestId: "
        "the same requestId replays this result without calling the upstream again.",
    ),
}


class CharterError(Exception):
    """Root of charter's exceptions."""


class ConfigurationError(CharterError, ValueError):
    """Raised when a tool, registry or host is declared wrongly, before anything is served.

    The message names the tool and the field at fault and says how to fix it.
    """


class ToolError(CharterError):
    """Raised by a handler to fail with a coded error; the host turns it into ``Failed``.

    Raise it for expected domain failures (a trip that does not exist, a provider that
    is down). Any other exception from a handler becomes ``PROVIDER_ERROR`` with its
    message hidden from the caller.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        retryable: bool | None = None,
        next_steps: Sequence[str] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = coerce_code(code)
        self.message = message
        self.retryable = self.code in RETRYABLE_BY_DEFAULT if retryable is None else retryable
        self.next_steps = tuple(next_steps) or DEFAULT_NEXT_STEPS[self.code]
        self.meta: dict[str, Any] | None = dict(meta) if meta is not None else None

    def __repr__(self) -> str:
        return f"ToolError({self.code.value!r}, {self.message!r})"


class StoreError(CharterError):
    """Raised by a store when the database fails for a reason other than a lock wait.

    Examples: a statement rejected, a handler that left the transaction aborted. The
    original driver error is the ``__cause__``. (Also ``charter.store.StoreError``.)
    """


class StoreUnavailable(StoreError):
    """Raised by a store when the database cannot be reached or the connection was lost.

    The transaction did not commit, unless ``commit_unknown`` is true: then the connection
    was lost while the COMMIT was in flight, and the database may have committed it.
    Either way a retry with the same request id is safe: it replays what committed, or
    runs the action afresh. The gate answers ``PROVIDER_UNAVAILABLE`` (retryable).
    """

    def __init__(self, message: str, *, commit_unknown: bool = False) -> None:
        super().__init__(message)
        self.commit_unknown = commit_unknown
        """The connection was lost during COMMIT: the transaction may have committed."""


class StoreBusy(CharterError):
    """Raised by a store when a transaction or a claim could not get its lock in time.

    Nothing was written; the gate answers ``REQUEST_IN_PROGRESS`` (retryable).
    """


def coerce_code(code: ErrorCode | str) -> ErrorCode:
    """Map a code string to ``ErrorCode``; unknown codes fall back to ``PROVIDER_ERROR``."""
    if isinstance(code, ErrorCode):
        return code
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.PROVIDER_ERROR
