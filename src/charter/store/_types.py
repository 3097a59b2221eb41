"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

from .errors import UnstorableValue

__all__ = (
    "JSONText",
    "SafeText",
    "UTCDateTime",
    "check_storable",
    "is_storable",
    "searchable",
)

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def is_storable(*values: str | None) -> bool:
    """Tell whether every value can be written to both databases unchanged."""
    return not any(v is not None and _UNSTORABLE.search(v) for v in values)


def searchable(value: str) -> str:
    """``value`` with NUL and unpaired surrogates replaced by U+FFFD (for search columns)."""
    return _UNSTORABLE.sub("\ufffd", value)


def check_storable(value: str) -> str:
    """Return ``value``, or raise ``UnstorableValue`` if a database cannot hold it."""
    if _UNSTORABLE.search(value):
        raise UnstorableValue(
            "A text value contains a NUL character (U+0000) or an unpaired surrogate, "
            "which the ledger cannot store."
        )
    return value


class SafeText(sa.TypeDecorator[str]):
    """Text that refuses NUL characters and unpaired surrogates before the driver sees them.

    SQLite would store NUL and PostgreSQL rejects it with a driver error mid-transaction;
    checking here gives both backends one clean ``UnstorableValue``.
    """

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        """Check a value on its way to the database."""
        return None if value is None else check_storable(value)


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on both databases.

    PostgreSQL stores ``timestamptz``. SQLite has no time zones, so the value is stored as
    fixed-width ISO 8601 text in UTC (``0001-01-01T00:00:00.000000+00:00``), which sorts and
    compares in time order. Naive datetimes are refused rather than guessed.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """Text on SQLite, ``timestamptz`` elsewhere."""
        if dialect.name == "sqlite":
            return dialect.type_descriptor(sa.String(32))
        return dialect.type_descriptor(sa.DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        """Convert an aware datetime to UTC (ISO text on SQLite)."""
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("charter stores timezone-aware datetimes only; pass a UTC time")
        utc = value.astimezone(UTC)
        return utc.isoformat(timespec="microseconds") if dialect.name == "sqlite" else utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """Read back an aware UTC datetime."""
        if value is None:
            return None
        if isinstance(value, str):
            return datetime.fromisoformat(value).astimezone(UTC)
        assert isinstance(value, datetime)
        return value.astimezone(UTC)


class JSONText(sa.TypeDecorator[Any]):
    """A JSON value stored as ASCII text, so every string round-trips on both databases.

    ``ensure_ascii`` writes NUL and lone surrogates as JSON escapes, which keeps them out
    of PostgreSQL's text while ``json.loads`` restores them exactly.
    """

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        """Serialise compactly and strictly (no NaN or infinities)."""
        if value is None:
            return None
        return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        """Parse the stored JSON."""
        return None if value is None else json.loads(value)
