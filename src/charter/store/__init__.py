"""The durable ledger on SQL: ``SqlStore`` (SQLite or PostgreSQL) and API keys.

Install with ``pip install 'charter[sql]'`` (add ``'charter[postgres]'`` for PostgreSQL).
``import charter`` never imports this package.
"""

from __future__ import annotations

from importlib.util import find_spec

try:
    import sqlalchemy  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(f"charter.store needs {exc.name}: pip install 'charter[sql]'") from exc
# Alembic is imported only to migrate (_migrate): here it is only looked for.
if find_spec("alembic") is None:  # pragma: no cover - depends on the installed extras
    raise ImportError("charter.store needs alembic: pip install 'charter[sql]'")

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
