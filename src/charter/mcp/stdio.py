"""MCP over stdio, as one configured principal.

The SDK's ``stdio_server`` reads each line with its own parser, which lets the last of two
equal keys win and logs a line it cannot parse without answering it. So ``serve_stdio``
hands it stdin through ``_CheckedLines``: each line is read first as the HTTP gate reads
a body (``_gate.read_message``), and a line refused there never reaches the SDK; it is
answered with a JSON-RPC error written to the SDK's write stream, as any answer is.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import BinaryIO, Protocol, TextIO

import anyio
import jiter
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from .. import __version__
from .._limits import PayloadLimits, PayloadRejected
from ..auth import Principal
from ..host import Host
from ._gate import UNREADABLE, has_invalid_id, invalid_id_error, read_message
from ._render import Presenter
from .server import create_server

__all__ = ("serve_stdio",)


async def serve_stdio(
    host: Host,
    principal: Principal | None,
    *,
    name: str = "charter",
    version: str = __version__,
    presenters: Mapping[str, Presenter] | None = None,
) -> None:
    """Serve ``host``'s tools on stdin/stdout until the client closes the pipe.

    stdio carries no credentials, so every call runs as ``principal``: the identity the
    operator who launched the process configured (scopes, tenant and all). Pass None to
    expose only public tools; there is no "anything goes" mode.

    Each line is checked as an HTTP body is (``charter.mcp._gate``) before the SDK parses
    it: a line that is not JSON is answered ``-32700``; one in which an object repeats a
    key, or that breaks ``host.limits``' size or depth, or a request whose ``id`` is
    neither a string nor an integer, is answered ``-32600`` (with the line's id when one
    can be read); none of them runs anything.

    Args:
        host: the host whose pipeline runs every call.
        principal: who every call runs as, or None for anonymous (public tools only).
        name: the server name announced to clients.
        version: the server version announced to clients.
        presenters: per-tool renderers of output as MCP content (see ``create_server``).
    """
    server = create_server(
        host, name=name, version=version, principal=principal, presenters=presenters
    )
    refusals, to_answer = anyio.create_memory_object_stream[types.JSONRPCError](0)
    with _wire_stdin() as wire:
        text = io.TextIOWrapper(wire, encoding="utf-8", errors="replace")
        lines = _CheckedLines(text, host.limits, refusals)
        async with (
            stdio_server(stdin=lines) as (read_stream, write_stream),
            anyio.create_task_group() as answering,
        ):
            answering.start_soon(_answer, to_answer, write_stream)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            answering.cancel_scope.cancel()


@contextmanager
def _wire_stdin() -> Iterator[BinaryIO]:
    """The protocol's stdin, with fd 0 on the null device while serving.

    The SDK's ``stdio_server`` does this for the stdin it opens itself and skips it for
    one handed to it: a handler or a child process that reads stdin gets EOF, never a
    protocol line. A ``sys.stdin`` not on fd 0 (replaced in process) is served as it is.
    """
    try:
        on_fd_0 = sys.stdin.buffer.fileno() == 0
    except (AttributeError, OSError, ValueError):
        on_fd_0 = False
    if not on_fd_0:
        yield sys.stdin.buffer
        return
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # closefd=False: a worker thread may still block reading it after we return.
        yield os.fdopen(wire, "rb", closefd=False)
    finally:
        os.dup2(wire, 0)


class _MessageSink(Protocol):
    """The SDK's write stream, as ``_answer`` uses it."""

    async def send(self, item: SessionMessage, /) -> None:
        """Queue one message for stdout."""
        ...


class _CheckedLines(anyio.AsyncFile[str]):
    """stdin for the SDK's ``stdio_server``: the lines ``read_message`` lets through.

    A refused line is handed to ``refusals`` as the JSON-RPC error that answers it, and
    the SDK never sees it. A blank line passes untouched (the SDK skips it as before).
    """

    def __init__(
        self,
        fp: TextIO,
        limits: PayloadLimits,
        refusals: MemoryObjectSendStream[types.JSONRPCError],
    ) -> None:
        super().__init__(fp)
        self._limits = limits
        self._refusals = refusals

    async def __aiter__(self) -> AsyncIterator[str]:
        async with self._refusals:
            while line := await self.readline():
                refusal = _refusal(line, self._limits) if line.strip() else None
                if refusal is None:
                    yield line
                else:
                    await self._refusals.send(refusal)


def _refusal(line: str, limits: PayloadLimits) -> types.JSONRPCError | None:
    """The JSON-RPC error that answers ``line``, or None when the SDK may have it."""
    raw = line.encode("utf-8", "replace")
    try:
        message = read_message(raw, limits)
    except PayloadRejected as exc:
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=_readable_id(raw),
            error=types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"Invalid Request: the message was rejected: {exc}",
                data={"reason": exc.reason},
            ),
        )
    if message is UNREADABLE:
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=types.ErrorData(code=types.PARSE_ERROR, message="Parse error"),
        )
    if has_invalid_id(message):
        return invalid_id_error()
    return None


def _readable_id(raw: bytes) -> str | int | None:
    """The id of a refused line, read leniently (the last of repeated keys), if valid."""
    try:
        message = jiter.from_json(raw)
    except ValueError:
        return None
    request_id = message.get("id") if type(message) is dict else None
    return request_id if type(request_id) is str or type(request_id) is int else None


async def _answer(
    refusals: MemoryObjectReceiveStream[types.JSONRPCError],
    write_stream: _MessageSink,
) -> None:
    """Write each refused line's error to the SDK's write stream, in the order refused."""
    async with refusals:
        async for error in refusals:
            try:
                await write_stream.send(SessionMessage(error))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
