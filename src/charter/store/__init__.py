"""The durable ledger on SQL: ``SqlStore`` (SQLite or PostgreSQL) and API keys.

Install with ``pip install 'charter[sql]'`` (add ``'charter[postgres]'`` for PostgreSQL).
``import charter`` never imports this package.
"""

from __future__ import annotations

try:
    import alembic  # noqa: F401
    import sqlalchemy  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(f"charter.store needs {exc.name}: pip install 'charter[sql]'") from exc

from ._engine import sqlite_url as sqlite_url
from .api_keys import API_KEY_PREFIX as API_KEY_PREFIX
from .api_keys import ApiKeyAuthenticator as ApiKeyAuthenticator
from .api_keys import ApiKeyRecord as ApiKeyRecord
from .errors import SchemaMismatch as SchemaMismatch
from .errors import StoreBusy as StoreBusy
from .errors import StoreError as StoreError
from .errors import StoreUnavailable as StoreUnavailable
from .errors import UnstorableValue as UnstorableValue
from .sql import SqlStore as SqlStore

__all__ = (
    "API_KEY_PREFIX",
    "ApiKeyAuthenticator",
    "ApiKeyRecord",
    "SchemaMismatch",
    "SqlStore",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
    "UnstorableValue",
    "sqlite_url",
)
