"""Opening a host's store for serving and closing it after (``Host.running``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Protocol, runtime_checkable

__all__ = ("opened",)


@runtime_checkable
class _OpensOnce(Protocol):
    """Protocol: a resource opened once before use and closed after (``SqlStore``)."""

    @property
    def state(self) -> str:
        """``new`` (not opened yet), ``open`` or ``closed``."""
        ...

    async def open(self) -> None:
        """Connect; allowed once, while ``new``."""
        ...

    async def aclose(self) -> None:
        """Release everything; the resource cannot be reopened."""
        ...


@asynccontextmanager
async def opened(
    resources: Iterable[object], *, drain: Callable[[], Awaitable[None]]
) -> AsyncIterator[None]:
    """Open the unopened ``resources`` that must be opened; on the way out ``drain``, close them.

    A resource the application opened itself is left as it is (its owner closes it), but
    ``drain`` runs either way: what it finishes (calls running on, pending audit counts)
    must reach the store before its owner closes it, whoever that is.

    Raises:
        RuntimeError: a resource was already closed.
    """
    opened_here: list[_OpensOnce] = []
    for resource in dict.fromkeys(resources):
        if isinstance(resource, _OpensOnce) and resource.state == "new":
            await resource.open()
            opened_here.append(resource)
        elif isinstance(resource, _OpensOnce) and resource.state == "closed":
            raise RuntimeError(f"{resource!r} is closed; give the host a new one to serve again")
    try:
        yield
    finally:
        await drain()
        for resource in reversed(opened_here):
            await resource.aclose()
