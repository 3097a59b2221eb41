"""Build the async engine for a store URL."""

from __future__ import annotations

import math
import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ..errors import ConfigurationError
from ._dialects import configure_postgresql, configure_sqlite

__all__ = ("make_engine", "sqlite_url")

_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}
_EXTRA = {"sqlite+aiosqlite": "sql", "postgresql+psycopg": "postgres"}


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The ``sqlite+aiosqlite`` URL of a database file (made absolute, special characters escaped).

    Args:
        path: The database file; it is created (and migrated) on first use.
    """
    url = sa.engine.URL.create("sqlite+aiosqlite", database=str(Path(path).resolve()))
    return url.render_as_string(hide_password=False)


def _parse(url: str) -> sa.engine.URL:
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ConfigurationError(f"Not a database URL: {exc}") from None
    driver = _DRIVERS.get(parsed.drivername)
    if driver is None:
        raise ConfigurationError(
            f"SqlStore supports sqlite+aiosqlite:///path and postgresql+psycopg://…, not "
            f"{parsed.drivername!r}."
        )
    if driver.startswith("sqlite") and parsed.database in (None, "", ":memory:"):
        raise ConfigurationError(
            "SqlStore needs a SQLite file (in-memory SQLite is private to one connection); "
            "use sqlite_url(path), or charter.ledger.MemoryStore for tests."
        )
    return parsed.set(drivername=driver)


def make_engine(url: str, *, busy_timeout: float, pool_size: int, echo: bool) -> AsyncEngine:
    """Create the engine for ``url``, configured for charter's transactions.

    Raises:
        ConfigurationError: The URL is not a supported file or server URL.
        ImportError: The database driver is not installed (names the extra to install).
    """
    if pool_size < 1:
        raise ConfigurationError("SqlStore pool_size must be at least 1")
    if not busy_timeout >= 0:
        raise ConfigurationError("SqlStore busy_timeout must be a number of seconds >= 0")
    parsed = _parse(url)
    kind = "sqlite" if parsed.drivername.startswith("sqlite") else "postgresql"
    options: dict[str, object] = {
        "echo": echo,
        "pool_size": pool_size,
        # A fixed ceiling: PostgreSQL's max_connections is shared by every replica.
        "max_overflow": 0,
    }
    if kind == "postgresql":
        options["isolation_level"] = "READ COMMITTED"
    try:
        engine = create_async_engine(parsed, **options)
    except ModuleNotFoundError as exc:
        extra = _EXTRA[parsed.drivername]
        raise ImportError(
            f"SqlStore with {parsed.drivername} needs {exc.name}: pip install 'charter[{extra}]'"
        ) from exc
    busy_timeout_ms = math.ceil(busy_timeout * 1000)
    if kind == "sqlite":
        configure_sqlite(engine, busy_timeout_ms=busy_timeout_ms)
    else:
        # Survives a server restart: a pooled connection the server closed is replaced
        # at checkout, not handed out (see configure_postgresql).
        configure_postgresql(engine, lock_timeout_ms=busy_timeout_ms)
    return engine
