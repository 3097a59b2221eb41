"""Running a handler: in this task or a worker thread, under its timeout and cancel signal.

A sync handler runs in the registry's bounded thread pool; an async one in the calling
task. Either way the call's ``ctx.cancel`` cancels it (a sync handler polls it), its
timeout ends it, and an unexpected exception becomes ``PROVIDER_ERROR`` with an error id
(the exception's text goes to the log only).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .._safe_log import log_exception
from .._wording import new_error_id
from ..context import ToolContext
from ..errors import ErrorCode, ToolError
from ..manifest import RegisteredTool
from ..outcome import Failed, failed, failed_from_error

__all__ = ("HandlerRunner", "provider_error")

logger = logging.getLogger("charter")


class HandlerRunner:
    """Runs handlers; owns the worker threads of sync ones (started on demand)."""

    def __init__(self, *, max_threads: int) -> None:
        """Run at most ``max_threads`` sync handlers at once."""
        self._max_threads = max_threads
        self._executor: ThreadPoolExecutor | None = None

    async def run(
        self, registered: RegisteredTool, parsed: Any, ctx: ToolContext
    ) -> object | Failed:
        """The handler's return value, or the ``Failed`` it ended with.

        The handler is awaited in this task (a sync one in a worker thread, awaited here)
        under its timeout, and cancelled when ``ctx.cancel`` fires, from any thread, unless
        the tool is not ``cancellable`` (a signal set before it starts still stops it).
        """
        tool = registered.tool
        args = (parsed, ctx) if tool.takes_context else (parsed,)
        timeout = tool.timeout
        result: object
        awaitable: Any  # the handler's coroutine (or its worker thread's)
        try:
            if tool.is_async:
                awaitable = tool.handler(*args)
            else:
                awaitable = self._in_thread(tool.handler, args)
            signal = ctx.cancel
            if signal.is_set():
                if inspect.iscoroutine(awaitable):
                    awaitable.close()
                raise _CancelledBySignal
            loop = asyncio.get_running_loop()
            watch = _Watch(asyncio.current_task(loop), loop)
            # A tool its caller cannot interrupt runs on when the signal fires.
            unsubscribe = signal.subscribe(watch.on_signal) if tool.cancellable else _nothing
            try:
                if timeout is None:
                    result = await awaitable
                else:
                    async with asyncio.timeout(timeout):
                        result = await awaitable
                watch.done = True
                return result
            except asyncio.CancelledError:
                watch.done = True
                task = watch.task
                if watch.fired and task is not None and task.uncancel() == 0:
                    raise _CancelledBySignal from None
                if task is not None and task.cancelling() == 0:
                    # Nothing is cancelling this task: the handler raised it itself (it
                    # awaited a future something else cancelled), which is its failure.
                    return provider_error(registered.name, "handler")
                raise
            finally:
                watch.done = True
                unsubscribe()
        except ToolError as exc:
            return failed_from_error(exc)
        except TimeoutError:
            ctx.cancel.set()
            return failed(
                ErrorCode.TIMEOUT,
                f"Tool {registered.name!r} did not finish within {timeout} s.",
                retryable=True,
            )
        except _CancelledBySignal:
            return failed(ErrorCode.CANCELLED, f"The call to {registered.name!r} was cancelled.")
        except asyncio.CancelledError:
            ctx.cancel.set()
            raise
        except Exception as exc:
            # A lock wait or lost connection in the handler's own ctx.db statements rolled
            # the call back: the store says so, and the caller may retry.
            transient = ctx.db_error(exc) if ctx.db_error is not None else None
            if transient is not None:
                return failed_from_error(transient)
            return provider_error(registered.name, "handler")

    async def _in_thread(self, func: Any, args: tuple[Any, ...]) -> Any:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._max_threads, thread_name_prefix="charter-tool"
            )
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, func, *args)
        return await loop.run_in_executor(self._executor, call)

    def close(self) -> None:
        """Shut the worker threads down (they are started again on demand)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def _nothing() -> None:
    """Unsubscribe nothing (the handler's task was not subscribed to the signal)."""


class _CancelledBySignal(Exception):
    """The call's cancel signal fired while the handler ran."""


class _Watch:
    """Cancels the handler's task when the call's cancel signal fires (from any thread)."""

    __slots__ = ("done", "fired", "loop", "task")

    def __init__(self, task: asyncio.Task[Any] | None, loop: asyncio.AbstractEventLoop) -> None:
        self.task = task
        self.loop = loop
        self.done = False
        self.fired = False

    def on_signal(self) -> None:
        self.loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        if not self.done and self.task is not None:
            self.fired = True
            self.task.cancel()


def provider_error(name: str, where: str) -> Failed:
    """The ``PROVIDER_ERROR`` of an unexpected exception, logged under a new error id."""
    logged_as = new_error_id()
    log_exception(logger, "tool %s: %s raised (error id %s)", name, where, logged_as)
    return failed(
        ErrorCode.PROVIDER_ERROR,
        f"Tool {name!r} failed. Error id: {logged_as}.",
        reason="unhandled_exception",
        errorId=logged_as,
    )
