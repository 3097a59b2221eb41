"""``StoreCheck``: one behaviour of the store contract, and how a failed one reports itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from ..ledger import LedgerStore

__all__ = ("CheckFunction", "StoreCheck", "expect", "expect_equal", "store_check")

CheckFunction: TypeAlias = Callable[[LedgerStore], Awaitable[None]]
"""An async function that checks one behaviour on a fresh, empty store."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreCheck:
    """One behaviour every ``LedgerStore`` must have, checked on a fresh, empty store.

    Await it with the store: ``await check(store)``. It raises ``AssertionError`` saying
    what the store did instead, or lets the store's own error through. ``str(check)`` is
    its name, which makes a readable pytest id.
    """

    name: str
    """The behaviour in snake case, e.g. ``claim_replaces_an_expired_entry``."""
    description: str = field(repr=False)
    """The behaviour as a sentence (the first line of the check's docstring)."""
    run: CheckFunction = field(repr=False)
    """The check itself."""

    async def __call__(self, store: LedgerStore) -> None:
        """Run the check against ``store``, which must be open and empty."""
        await self.run(store)

    def __str__(self) -> str:
        return self.name


def store_check(run: CheckFunction) -> StoreCheck:
    """Make a check from an async function: its name and docstring name the behaviour."""
    description = (run.__doc__ or "").strip().splitlines()
    return StoreCheck(
        name=getattr(run, "__name__", "store_check"),
        description=description[0] if description else "",
        run=run,
    )


def expect(condition: bool, what: str) -> None:
    """Fail the check with ``what`` unless ``condition`` holds (kept under ``python -O``)."""
    if not condition:
        raise AssertionError(what)


def expect_equal(actual: object, expected: object, what: str) -> None:
    """Fail the check unless ``actual == expected``, showing both."""
    if actual != expected:
        raise AssertionError(f"{what}\n  expected: {expected!r}\n  got:      {actual!r}")
