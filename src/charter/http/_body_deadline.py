"""A deadline for reading a request body, and no connection reuse after an unread one."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
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
        timed = _TimedRequest(self, receive, send, loop.time() + self.seconds)
        try:
            await self.app(scope, timed.read, timed.answer)
        except (_TooSlow, BaseExceptionGroup) as exc:
            # The clock stops when the answer starts, so a started answer is not ours.
            if timed.started or not _only_too_slow(exc):
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


class _TimedRequest:
    """One request's ``receive`` and ``send`` as the app sees them.

    Its reads are timed until the body is complete; its answer's start is noted.

    One object with plain methods, not two closures: each read or send after the body
    hands the app the server's own awaitable, with no frame of ours around it. The SDK
    keeps one read waiting for a disconnect and cancels it at the end; frames and closure
    cells in that read would join the garbage cycle its cancellation leaves behind.
    """

    __slots__ = ("_deadline", "_due", "_receive", "_send", "complete", "started")

    def __init__(self, deadline: BodyDeadline, receive: Receive, send: Send, due: float) -> None:
        self._deadline = deadline
        self._receive = receive
        self._send = send
        self._due = due
        self.complete = False
        self.started = False

    def read(self) -> Awaitable[Message]:
        """The next message; timed while the body is incomplete and nothing is answered."""
        if self.complete or self.started:
            return self._receive()
        return self._timed_read()

    async def _timed_read(self) -> Message:
        # Timed while it waits (``_expire`` cancels it past the deadline); inline, not a
        # task of its own: most requests read their whole body once, here.
        deadline = self._deadline
        loop = deadline._loop
        task = asyncio.current_task(loop)
        assert loop is not None and task is not None
        waiting, overdue = deadline._waiting, deadline._overdue
        waiting[task] = self._due
        if deadline._timer is None:
            deadline._timer = loop.call_at(self._due, deadline._expire)
        try:
            message = await self._receive()
        except asyncio.CancelledError:
            deadline._raise_if_overdue(task)
            raise
        finally:
            waiting.pop(task, None)
            if overdue:
                overdue.discard(task)
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.complete = True  # the whole body, or the client left
        return message

    def answer(self, message: Message) -> Awaitable[None]:
        """Send ``message``; an answer started before the whole body closes the connection."""
        if message["type"] == "http.response.start" and not self.started:
            self.started = True
            if not self.complete:
                message = _closing(message)
        return self._send(message)


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
