"""Objects accepted back once: the host's prepared calls, the registry's prepared actions."""

from __future__ import annotations

import weakref
from typing import Generic, TypeVar

__all__ = ("SingleUse",)

_T = TypeVar("_T")


class SingleUse(Generic[_T]):
    """The objects issued here and not yet spent, held weakly; each may be spent once.

    A dropped object leaves by its reference's callback: a ``WeakSet`` without its Python
    frames per object, since the host issues and spends one per call.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        """Hold nothing yet."""
        self._held: set[weakref.ref[_T]] = set()

    def issue(self, item: _T) -> None:
        """Hold ``item`` until it is spent, discarded or dropped."""
        held = self._held
        held.add(weakref.ref(item, held.discard))

    def spend(self, item: _T) -> bool:
        """Whether ``item`` was issued here and not spent yet; spends it if so."""
        try:
            # One look-up both checks and spends (a reference to the same object equals
            # the one held).
            self._held.remove(weakref.ref(item))
        except (KeyError, TypeError):  # TypeError: not even weakly referable, so not ours
            return False
        return True

    def discard(self, item: _T) -> None:
        """Stop holding ``item`` (it will not be spent)."""
        self._held.discard(weakref.ref(item))
