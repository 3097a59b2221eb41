"""Helpers for testing an application, or a store, built with charter.

- ``assert_compatible_with_lock``: fail when the live tools break the contract recorded in
  a lock file (``charter lock``).
- The store contract (``charter.testing.store_contract``): ``STORE_CHECKS``, the checks every
  ``LedgerStore`` must pass, each a ``StoreCheck`` to await with a fresh store, and
  ``check_store_contract`` to run them all. Run them against a store of your own.

Importing this package imports no test framework and nothing beyond ``charter``'s core.
"""

from __future__ import annotations

from ._lock_file import assert_compatible_with_lock
from .store_contract import STORE_CHECKS, StoreCheck, StoreFactory, check_store_contract

__all__ = (
    "STORE_CHECKS",
    "StoreCheck",
    "StoreFactory",
    "assert_compatible_with_lock",
    "check_store_contract",
)
