"""Constants and builders the tests share, so that one change of the contract is one edit.

Import them as ``from tests.builders import WRITE_RISK``; a folder's own support module
(``tests/battery/battery_support.py``, ``tests/store/store_records.py``) holds what only
that folder builds.
"""

from __future__ import annotations

from charter.risk import RiskPolicy

WRITE_RISK = RiskPolicy(destructive=False, reversible=True, dry_run_supported=False)
"""A write that can be undone: ledgered, no approval needed by its risk alone."""

DESTRUCTIVE_RISK = RiskPolicy(destructive=True, reversible=False, dry_run_supported=False)
"""A write that cannot be undone."""
