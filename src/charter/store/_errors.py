"""Translate SQLAlchemy and driver errors into charter's where they enter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from ..ledger import StoreBusy
from ._dialects import is_busy
from .errors import StoreError, UnstorableValue

__all__ = ("translated",)


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Re-raise database errors from the block as charter errors.

    Lock waits that ran out (SQLite busy, PostgreSQL 55P03, 40001, 40P01) and an exhausted
    connection pool become ``StoreBusy``; a value refused by a column type is re-raised as
    itself (``UnstorableValue``, or the ``ValueError`` of a naive datetime); everything else
    becomes ``StoreError``. Messages name the action, never the data.

    Args:
        action: What the store was doing, for the message ("claiming a request").
    """
    try:
        yield
    except sa.exc.StatementError as exc:
        if is_busy(exc):
            raise StoreBusy(f"the database stayed locked while {action}") from exc
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
