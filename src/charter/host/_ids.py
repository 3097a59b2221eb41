"""Random ids for invocations and audit events, without a system call per id."""

from __future__ import annotations

import os
import threading

__all__ = ("random_id",)


class _RandomIds:
    """Random 128-bit ids as hex, read from the OS 4 KiB at a time instead of per id.

    ``secrets.token_hex`` makes a system call per id, and every call needs two. Ids stay
    unpredictable (the bytes come from ``os.urandom``); a forked child starts a fresh
    pool, so parent and child never hand out the same ids.
    """

    _SIZE = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._offset = 0

    def next(self) -> str:
        with self._lock:
            offset = self._offset
            if offset >= len(self._pool):
                self._pool = os.urandom(self._SIZE)
                offset = 0
            self._offset = offset + 16
            return self._pool[offset : offset + 16].hex()

    def reset(self) -> None:
        self._pool = b""
        self._offset = 0


_IDS = _RandomIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_IDS.reset)


def random_id() -> str:
    """A fresh random id of 32 hex characters."""
    return _IDS.next()
