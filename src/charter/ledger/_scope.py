"""``Scope``: an ``async with`` resource that ends on the exception its block ended with."""

from __future__ import annotations

from abc import abstractmethod
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TypeVar

__all__ = ("Scope",)

_T = TypeVar("_T")


class Scope(AbstractAsyncContextManager[_T]):
    """An async context manager whose exit needs only how its block ended.

    A subclass writes ``_exit(failed)``: ``failed`` is the exception that left the block,
    None when the block ended normally. The stores' transaction scopes are scopes, so one
    can end another it holds with the same exception (``_exit``).
    """

    __slots__ = ()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._exit(exc)

    @abstractmethod
    async def _exit(self, failed: BaseException | None) -> None:
        """Commit (``failed`` is None) or roll back, and release what the scope holds."""
