"""The action ledger: what runs a call exactly once, and what it keeps.

- ``records``: a request's ledger entry, created-target claim, deferral, status.
- ``approvals``: approval records, bound to one exact command, and their decisions.
- ``approval_service``: ``Approvals``, the service that asks for, checks and decides
  approvals, and ``ApprovalNotices``, what must follow each change.
- ``protocols``: ``LedgerStore``, ``ApprovalStore`` and ``LedgerTransaction`` (both make the
  ``ApprovalWrites``), what a store implements (``charter.store.SqlStore`` on SQLite and
  PostgreSQL; ``MemoryStore`` here).
- ``gate``: ``LedgerGate``, which admits a call (replay, confirmation, approval) and runs
  it in one transaction (claim, approval consumed, handler writes, outcome, audit).
- ``memory``: ``MemoryStore``, the in-memory store for tests and examples (not durable).
"""

from __future__ import annotations

from ..outcome import ApprovalStatus as ApprovalStatus
from ._answers import confirmation_required as confirmation_required
from ._answers import in_progress as in_progress
from .approval_service import Approvals as Approvals
from .approvals import ApprovalCursor as ApprovalCursor
from .approvals import ApprovalDecision as ApprovalDecision
from .approvals import ApprovalRecord as ApprovalRecord
from .approvals import ListedStatus as ListedStatus
from .gate import LedgerGate as LedgerGate
from .gate import LedgerKey as LedgerKey
from .memory import MemoryStore as MemoryStore
from .protocols import ApprovalStore as ApprovalStore
from .protocols import ApprovalWrites as ApprovalWrites
from .protocols import FaultHook as FaultHook
from .protocols import FaultPoint as FaultPoint
from .protocols import LedgerStore as LedgerStore
from .protocols import LedgerTransaction as LedgerTransaction
from .records import ActionStatus as ActionStatus
from .records import ClaimRecord as ClaimRecord
from .records import DeferredRecord as DeferredRecord
from .records import LedgerEntry as LedgerEntry

__all__ = (
    "ActionStatus",
    "ApprovalCursor",
    "ApprovalDecision",
    "ApprovalRecord",
    "ApprovalStatus",
    "ApprovalStore",
    "ApprovalWrites",
    "Approvals",
    "ClaimRecord",
    "DeferredRecord",
    "FaultHook",
    "FaultPoint",
    "LedgerEntry",
    "LedgerGate",
    "LedgerKey",
    "LedgerStore",
    "LedgerTransaction",
    "ListedStatus",
    "MemoryStore",
    "confirmation_required",
    "in_progress",
)
