"""Random ids for invocations and audit events, without a system call per id."""

from __future__ import annotations

import os

__all__ = ("random_id",)


class _RandomIds:
    """Random 128-bit ids as hex, read from the OS 4 KiB at a time instead of per id.

    ``secrets.token_hex`` makes a system call per id, and every call needs two. Ids stay
    unpredictable (the bytes come from ``os.urandom``); a forked child starts a fresh
    pool, so parent and child never hand out the same ids.

    The pool is a list of ready hex ids taken with ``list.pop``, which is atomic (under
    the GIL and in free-threaded builds), so no lock is needed: threads that find it
    empty at once each draw a fresh pool, and the one not kept is dropped, never reused.
    """

    _SIZE = 4096

    def __init__(self) -> None:
        self._ids: list[str] = []

    def next(self) -> str:
        try:
            return self._ids.pop()
        except IndexError:
            pool = os.urandom(self._SIZE).hex()
            ids = [pool[at : at + 32] for at in range(0, len(pool), 32)]
            self._ids = ids
            return ids.pop()

    def reset(self) -> None:
        self._ids = []


_IDS = _RandomIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_IDS.reset)


def random_id() -> str:
    """A fresh random id of 32 hex characters."""
    return _IDS.next()
