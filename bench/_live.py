"""Live servers and clients for the benchmarks that go over a real transport.

The bench times a case in one event loop of its own, so what a case opens is held by a
task of its own (``Held``): the task enters everything on one ``AsyncExitStack`` and waits;
the case's ``close`` (``closing(...)``) cancels that one task once timing is over, which
closes the client, stops the server and ends the app's lifespan, in that order, in the
task that opened them, while everything else in the loop still runs. (Left to the loop's
final cancellation of every task at once, a server request still open, such as the
handshake-era standalone SSE stream, would be cancelled under uvicorn, which logs it.)

``serving(app)`` runs a Starlette app under uvicorn in the current event loop, listening
on 127.0.0.1 (a free port): the server's work and the client's then both count in the
process's CPU time, which is what the bench measures by default.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Generic, TypeVar

import uvicorn
from starlette.applications import Starlette

from bench import Case, Check, Operation, Sides

__all__ = ("Held", "closing", "held_case", "serving")

T = TypeVar("T")


@asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in this event loop; yield its base URL.

    uvicorn binds the port itself (port 0: a free one), as ``uvicorn --port`` does: asyncio
    then sets TCP_NODELAY on every accepted connection. (A socket made with
    ``socket.socket(AF_INET, SOCK_STREAM)`` and handed over has protocol 0, asyncio skips
    TCP_NODELAY, and a response written in two pieces waits ~40 ms for a delayed ACK.)

    The app's lifespan runs here, around the server, rather than in a task of uvicorn's
    own: the loop's final cancellation then reaches one task, which shuts the server down
    before the lifespan (the MCP session manager) ends.
    """
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan="off",
        log_level="warning",
        timeout_graceful_shutdown=5,
        access_log=False,
        ws="none",
    )
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    async with app.router.lifespan_context(app):
        await server.startup()
        try:
            await server.on_tick(0)  # the Date header, as uvicorn's main loop sets it
            (listener,) = [s for srv in server.servers for s in srv.sockets]
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            await server.shutdown()


class Held(Generic[T]):
    """Something a case opens once and uses for every call, held open by its own task.

    ``enter`` enters what it needs on the stack it is given and returns the object the
    case calls; ``open`` runs it once (in the event loop that times the case) and returns
    that object on every later call.
    """

    def __init__(self, enter: Callable[[AsyncExitStack], Awaitable[T]], label: str) -> None:
        self._enter = enter
        self.label = label
        self._value: T | None = None
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<{self.label}>"

    @property
    def value(self) -> T:
        """The opened object (``open`` first)."""
        assert self._value is not None, f"{self.label} is not open"
        return self._value

    async def open(self) -> T:
        """Open on first use; later calls return the same object."""
        if self._value is None:
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._hold(ready))
            await ready  # raises what opening raised
        return self.value

    async def close(self) -> None:
        """Close what ``open`` opened (in order, in its own task); raise what closing raised."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.wait([task])
        self._value = None
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with AsyncExitStack() as stack:
                self._value = await self._enter(stack)
                ready.set_result(None)
                await asyncio.Event().wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
                return
            raise


def closing(*held: Held[Any]) -> Callable[[], Awaitable[None]]:
    """A case's ``close``: close each of ``held``, every one even if one fails."""

    async def close() -> None:
        errors: list[BaseException] = []
        for one in held:
            try:
                await one.close()
            except Exception as exc:  # close the others, then report
                errors.append(exc)
        if errors:
            raise errors[0]

    return close


def held_case(
    charter: Held[T],
    baseline: Held[T],
    *,
    call: Callable[[Held[T]], Operation],
    check: Callable[[Held[T], Held[T]], Check],
    **case: Any,
) -> Case:
    """A case timing ``call(charter)`` against ``call(baseline)``, both held open.

    ``check(charter, baseline)`` runs before timing; both are closed after it (``closing``).
    """
    sides = Sides(call(charter), call(baseline), check(charter, baseline))
    return sides.case(close=closing(charter, baseline), **case)
