"""Errors raised by ``charter.store``.

No SQLAlchemy, aiosqlite or psycopg exception leaves this package; each is translated
where it enters, and the original is kept as ``__cause__``::

    CharterError
     ├── ToolError
     │    └── UnstorableValue   a string the database cannot hold (NUL, unpaired surrogate)
     └── StoreError             the database failed (statement rejected, transaction aborted)
          ├── StoreUnavailable  unreachable, or the connection was lost: retry the call
          └── SchemaMismatch    the database schema is not the one this charter expects

    StoreBusy (charter.ledger)  a lock was not granted within the wait; retry the call

``StoreError``, ``StoreUnavailable`` and ``StoreBusy`` are defined in ``charter.ledger``
(the gate, which may not import this package, answers them) and re-exported here. Using a
store before ``open()`` or after ``aclose()`` raises ``RuntimeError`` with the reason.
"""

from __future__ import annotations

from ..errors import ErrorCode, StoreBusy, StoreError, StoreUnavailable, ToolError

__all__ = ("SchemaMismatch", "StoreBusy", "StoreError", "StoreUnavailable", "UnstorableValue")


class UnstorableValue(ToolError, ValueError):
    """Raised before a write when a string holds a NUL character or an unpaired surrogate.

    PostgreSQL rejects NUL in text and no UTF-8 database can hold a lone surrogate, so both
    backends refuse such values up front, with the same error. It is a ``ToolError`` with
    code ``INVALID_INPUT`` (``meta["reason"] == "unstorable_value"``): raised inside a
    handler it becomes ``Failed`` like any tool error; raised to the gate it maps with
    ``failed_from_error``. The message never echoes the value.
    """

    def __init__(self, message: str) -> None:
        super().__init__(
            ErrorCode.INVALID_INPUT,
            message,
            next_steps=(
                "Remove NUL characters (U+0000) and unpaired surrogates from the arguments, "
                "then call again with a new requestId.",
            ),
            meta={"reason": "unstorable_value"},
        )


class SchemaMismatch(StoreError):
    """Raised by ``SqlStore.open()`` when the database schema is not this charter's.

    ``current`` is the revision found (None when charter tables exist without a version
    row); ``head`` is the revision this charter ships. The message says what to run.
    """

    def __init__(self, message: str, *, current: str | None, head: str) -> None:
        super().__init__(message)
        self.current = current
        self.head = head
