"""Translate SQLAlchemy and driver errors into charter's where they enter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from ..errors import ErrorCode, StoreBusy, StoreError, StoreUnavailable, ToolError
from ._dialects import is_busy, is_connection_lost, is_unreachable
from .errors import UnstorableValue

__all__ = ("transient_tool_error", "translated")

# How far down a handler's exception chain (__cause__, __context__) to look for a database
# error; a handler wraps one at most a few times.
_CHAIN_DEPTH = 8


@contextmanager
def translated(
    action: str, *, connecting: bool = False, committing: bool = False
) -> Iterator[None]:
    """Re-raise database errors from the block as charter errors.

    Lock waits that ran out (SQLite busy, PostgreSQL 55P03, 40001, 40P01) and an exhausted
    connection pool become ``StoreBusy``; a lost connection, or a server that cannot be
    reached while ``connecting``, becomes ``StoreUnavailable`` (``commit_unknown`` when
    ``committing``: the COMMIT may have reached the database); a value refused by a column
    type is re-raised as itself (``UnstorableValue``, or the ``ValueError`` of a naive
    datetime); everything else becomes ``StoreError``. Messages name the action, never
    the data.

    Args:
        action: What the store was doing, for the message ("claiming a request").
        connecting: The block opens a connection.
        committing: The block commits a transaction.
    """
    try:
        yield
    except sa.exc.StatementError as exc:
        if is_busy(exc):
            raise StoreBusy(f"the database stayed locked while {action}") from exc
        if is_connection_lost(exc) or (connecting and is_unreachable(exc)):
            raise _unavailable(action, connecting=connecting, committing=committing) from exc
        orig = exc.orig
        if isinstance(orig, UnstorableValue):
            raise orig from None
        if not isinstance(exc, sa.exc.DBAPIError) and isinstance(orig, ValueError | TypeError):
            raise orig from None
        name = type(orig).__name__ if orig is not None else type(exc).__name__
        raise StoreError(f"the database failed while {action} ({name})") from exc
    except sa.exc.TimeoutError as exc:
        raise StoreBusy(f"no database connection became free while {action}") from exc
    except sa.exc.SQLAlchemyError as exc:
        raise StoreError(f"the database failed while {action} ({type(exc).__name__})") from exc


def _unavailable(action: str, *, connecting: bool, committing: bool) -> StoreUnavailable:
    if connecting:
        return StoreUnavailable(f"the database could not be reached while {action}")
    if committing:
        return StoreUnavailable(
            f"the database connection was lost while {action}; the transaction may or may "
            "not have committed",
            commit_unknown=True,
        )
    return StoreUnavailable(
        f"the database connection was lost while {action}; the transaction did not commit"
    )


def transient_tool_error(exc: BaseException) -> ToolError | None:
    """The retryable ``ToolError`` for a transient database error in a handler, else None.

    Looks at ``exc`` and its causes for a driver error: a lock wait that ran out, a
    serialization failure or deadlock (``database_busy``), or a lost connection
    (``database_unavailable``). Either way the call's transaction rolls back, so nothing
    of it is stored and a retry with the same request id runs it afresh.
    """
    current: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):
        if current is None:
            return None
        if isinstance(current, sa.exc.DBAPIError):
            if is_busy(current):
                return ToolError(
                    ErrorCode.PROVIDER_UNAVAILABLE,
                    "The tool's database work waited too long for a lock or lost a race with "
                    "another transaction; the call was rolled back and nothing was stored.",
                    retryable=True,
                    next_steps=(
                        "Retry the same call with the same requestId in a moment; it runs afresh.",
                    ),
                    meta={"reason": "database_busy"},
                )
            if is_connection_lost(current):
                return ToolError(
                    ErrorCode.PROVIDER_UNAVAILABLE,
                    "The database connection was lost while the tool ran; the call was "
                    "rolled back and nothing was stored.",
                    retryable=True,
                    next_steps=(
                        "Retry the same call with the same requestId shortly; it runs afresh.",
                    ),
                    meta={"reason": "database_unavailable"},
                )
        current = current.__cause__ or current.__context__
    return None
