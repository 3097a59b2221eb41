"""A deadline for reading a request body, and no connection reuse after an unread one."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter.errors import ErrorCode

from ._problem import http_problem

__all__ = ("BodyDeadline",)

_CLOSE = (b"connection", b"close")


class BodyDeadline:
    """ASGI middleware: a request's body must arrive within ``seconds`` of its head.

    uvicorn waits for a body as long as the client keeps the connection open, so a client
    that sends a few bytes a minute holds a connection and a task forever. Past the
    deadline, a read of the body that is still waiting is stopped and, while nothing has
    been answered yet, the request is answered ``408`` with ``Connection: close``. The
    clock stops once the body is complete or the app starts its answer without it (a 401
    does); such an early answer also carries ``Connection: close``, since the unread rest
    of the body makes the connection unusable (and uvicorn would otherwise keep it open
    for as long as the client trickles). Requests without a body are not timed.

    Only a read that waits is timed, and one timer serves every request: a read notes its
    task and deadline while it waits, and the timer fires at the earliest deadline and
    cancels the reads still waiting then. Most bodies arrive with their head, so their
    note is dropped before any timer is due; a cancel scope and a timer per request cost
    each of them more than the rest of this middleware.
    """

    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        """Wrap ``app``; ``seconds`` must be positive and finite."""
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError("the body timeout must be a positive, finite number of seconds")
        self.app = app
        self.seconds = seconds
        # The reads waiting for a body, oldest (soonest due) first: the timeout is one
        # constant, so insertion order is deadline order.
        self._waiting: dict[asyncio.Task[Any], float] = {}
        self._overdue: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._serve_on(loop)
        due = loop.time() + self.seconds
        complete = False
        started = False

        async def read() -> Message:
            # Timed while it waits (``_expire`` cancels it past ``due``); inline, not a
            # coroutine of its own: most requests read their whole body once, here.
            nonlocal complete
            if complete or started:
                return await receive()
            task = asyncio.current_task(loop)
            assert task is not None
            waiting, overdue = self._waiting, self._overdue
            waiting[task] = due
            if self._timer is None:
                self._timer = loop.call_at(due, self._expire)
            try:
                message = await receive()
            except asyncio.CancelledError:
                self._raise_if_overdue(task)
                raise
            finally:
                waiting.pop(task, None)
                if overdue:
                    overdue.discard(task)
            if message["type"] != "http.request" or not message.get("more_body", False):
                complete = True  # the whole body, or the client left
            return message

        async def answer(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start" and not started:
                started = True
                if not complete:
                    message = _closing(message)
            await send(message)

        try:
            await self.app(scope, read, answer)
        except (_TooSlow, BaseExceptionGroup) as exc:
            # The clock stops when the answer starts, so a started answer is not ours.
            if started or not _only_too_slow(exc):
                raise
            await self._timed_out(scope, receive, send)

    async def _timed_out(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer the 408 of a body that did not arrive in time."""
        response = http_problem(
            408,
            "Request timeout",
            f"The request body did not arrive within {self.seconds:g} seconds.",
            code=ErrorCode.TIMEOUT,
            reason="body_timeout",
            headers={"Connection": "close"},
            retryable=True,
        )
        await response(scope, receive, send)

    def _serve_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve on ``loop``, another event loop than before: the old one's reads are gone."""
        self._loop, self._timer = loop, None
        self._waiting.clear()
        self._overdue.clear()

    def _raise_if_overdue(self, task: asyncio.Task[Any]) -> None:
        """Raise ``_TooSlow`` if only this deadline cancelled ``task``'s read.

        Another cancellation at the same time (the client left, a shutdown) goes on.
        """
        if task in self._overdue:
            self._overdue.discard(task)
            if task.uncancel() == 0:
                raise _TooSlow from None

    def _expire(self) -> None:
        """Cancel the reads whose body is overdue; set the timer for the next one."""
        assert self._loop is not None
        self._timer = None
        now = self._loop.time()
        while self._waiting:
            task, due = next(iter(self._waiting.items()))
            if due > now:
                self._timer = self._loop.call_at(due, self._expire)
                return
            del self._waiting[task]
            self._overdue.add(task)
            task.cancel()


class _TooSlow(Exception):
    """Raised into the app when its read of the body passes the deadline."""


def _closing(start: Message) -> Message:
    """A response start with ``Connection: close`` added (unless it has a ``Connection``)."""
    headers = list(start.get("headers", ()))
    if any(name == b"connection" for name, _ in headers):
        return start
    return {**start, "headers": [*headers, _CLOSE]}


def _only_too_slow(exc: BaseException) -> bool:
    """Whether ``exc`` is the deadline's signal, alone or in a group.

    An app that reads the body inside a task group gets the signal wrapped.
    """
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(lambda each: not isinstance(each, _TooSlow)) is None
    return isinstance(exc, _TooSlow)


def _has_body(scope: Scope) -> bool:
    """Whether the request announces a body (HTTP/1.1: a length above 0, or chunked)."""
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
    return False
