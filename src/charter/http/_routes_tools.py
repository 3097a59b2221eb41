"""``/v1/tools``: discovery and calls, each a straight mapping onto the host."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic_core import to_json
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from charter._asgi import content_length, too_large
from charter._wording import canonical_uuid
from charter.context import CancelSignal
from charter.host import CallOptions, Host
from charter.manifest import CONTRACT_VERSION
from charter.outcome import (
    Completed,
    Deferred,
    Denied,
    Failed,
    InteractionRequired,
    ToolOutcome,
)
from charter.policy import CONTROL_FIELD, InvocationControls

from ._authentication import caller_of
from ._media_type import unsupported_body
from ._payloads import AcceptedBody, ToolListBody
from ._problem import denied_problem, failed_problem
from ._request import authenticate, controls_from_headers, read_body
from ._responses import json_response

__all__ = ("CallEndpoint", "ToolRoutes", "render_outcome")

_WATCH_AFTER_SECONDS = 0.05


class ToolRoutes:
    """The endpoints under ``/v1/tools`` for one host."""

    def __init__(self, host: Host) -> None:
        """Serve ``host``'s tools."""
        self.host = host

    async def list_tools(self, request: Request) -> Response:
        """``GET /v1/tools``: the manifest entries the caller may call."""
        caller = caller_of(request)
        body = ToolListBody(contract_version=CONTRACT_VERSION, tools=self.host.discover(caller))
        return json_response(body)

    async def get_tool(self, request: Request) -> Response:
        """``GET /v1/tools/{name}``: one entry, by name or alias; hidden tools are unknown."""
        caller = caller_of(request)
        name: str = request.path_params["name"]
        entries = self.host.discover(caller)
        for entry in entries:
            if entry["name"] == name or name in entry.get("aliases", ()):
                return json_response(entry)
        visible = [n for e in entries for n in (e["name"], *e.get("aliases", ()))]
        return failed_problem(self.host.registry.not_found(name, visible))

    def public(self, name: str) -> bool:
        """Whether an anonymous caller may call the tool ``name`` names (canonical or alias)."""
        registered = self.host.registry.get(name)
        return registered is not None and any(
            t.name == registered.name for t in self.host.callable_tools(None)
        )


class CallEndpoint:
    """``POST /v1/tools/{name}:call`` as a plain ASGI app: the body is the arguments.

    Most of a server's REST traffic, so it does what the other routes leave to
    Starlette's middleware and ``Request``/``Response`` objects itself, in this order:
    the caller (``authenticate``, as ``_authentication``'s middleware: 400/401/503), a
    declared ``Content-Length`` over ``max_bytes`` (413, as ``BodyLimit``), the controls
    sent as headers (400), a body not declared JSON (415, ``_media_type``), then the
    body, read up to ``max_bytes`` (413 past it) and passed on unparsed: the host parses
    it under its payload limits. A completed call's
    answer is sent as bytes, without a ``Response``.
    """

    __slots__ = ("_host", "_max_bytes", "_tools", "_watches")

    def __init__(self, tools: ToolRoutes, *, max_bytes: int) -> None:
        """Serve ``tools``' calls; ``max_bytes`` (positive) bounds a body."""
        if max_bytes < 1:
            raise ValueError("max_body_bytes must be a positive number of bytes")
        self._tools = tools
        self._host = tools.host
        self._max_bytes = max_bytes
        self._watches = _DisconnectWatches()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one call."""
        host = self._host
        caller = await authenticate(host, scope)
        if isinstance(caller, Response):
            await caller(scope, receive, send)
            return
        declared = content_length(scope["headers"])
        if declared is not None and declared > self._max_bytes:
            await too_large(scope, receive, send, self._max_bytes)
            return
        controls = controls_from_headers(scope)
        if isinstance(controls, Response):
            await controls(scope, receive, send)
            return
        name: str = scope["path_params"]["name"]
        if caller is None and not self._tools.public(name):
            # Anonymous, and no tool by that name runs anonymously: the host refuses the
            # call (unknown tool, or authentication required) before it looks at the
            # arguments, so answer that without waiting for a body nobody will read.
            refused = await host.invoke(name, {}, None, controls)
            await _answer(refused, scope, receive, send, controls=controls, body=b"")
            return
        unsupported = unsupported_body(scope)
        if unsupported is not None:
            await unsupported(scope, receive, send)
            return
        body = await read_body(receive, self._max_bytes)
        if body is None:
            await too_large(scope, receive, send, self._max_bytes)
            return
        # An empty body means no arguments; the host parses everything else itself.
        body = body or b"{}"
        cancel = CancelSignal()
        self._watches.begin(receive, cancel)
        try:
            outcome = await host.invoke(
                name, body, caller, controls, call=CallOptions(cancel=cancel)
            )
        finally:
            started = self._watches.end(cancel)
            if started is not None:
                await asyncio.gather(started, return_exceptions=True)
        await _answer(outcome, scope, receive, send, controls=controls, body=body)


_JSON_HEADER = (b"content-type", b"application/json")
_REPLAYED_HEADER = (b"idempotent-replayed", b"true")


async def _answer(
    outcome: ToolOutcome,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    controls: InvocationControls | None,
    body: bytes,
) -> None:
    """Send ``render_outcome``'s answer; a completed call's straight from its JSON bytes."""
    if isinstance(outcome, Completed):
        # The headers are a Response's: its own first, then length and type.
        content = _completed_content(outcome)
        headers = [(b"content-length", str(len(content)).encode()), _JSON_HEADER]
        if outcome.replayed:
            headers.insert(0, _REPLAYED_HEADER)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": content})
        return
    response = render_outcome(
        outcome, root_path=scope.get("root_path", ""), controls=controls, body=body
    )
    await response(scope, receive, send)


class _DisconnectWatches:
    """Sets a call's ``cancel`` if the client goes away while it runs (the body is read).

    Watching costs a task, and most calls end within milliseconds, so a call is watched
    only once it has run for ``_WATCH_AFTER_SECONDS`` (a disconnect before that is still
    queued for it). One timer serves every call of the endpoint: a call notes its receive
    channel and when it is due, and the timer fires at the earliest due call, starts the
    watch of each call due then and sets itself for the next; a timer per call would cost
    each call more than the rest of this. The host runs on asyncio, so this does too.
    """

    __slots__ = ("_due", "_loop", "_tasks", "_timer")

    def __init__(self) -> None:
        # The calls not yet watched, soonest due first: the delay is one constant, so
        # insertion order is due order.
        self._due: dict[CancelSignal, tuple[Receive, float]] = {}
        self._tasks: dict[CancelSignal, asyncio.Task[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def begin(self, receive: Receive, cancel: CancelSignal) -> None:
        """Watch a call from now on (its body read): ``cancel`` is set on a disconnect."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # served by another event loop than before
            self._loop, self._timer = loop, None
            self._due.clear()
            self._tasks.clear()
        due = loop.time() + _WATCH_AFTER_SECONDS
        self._due[cancel] = (receive, due)
        if self._timer is None:
            self._timer = loop.call_at(due, self._start_due)

    def end(self, cancel: CancelSignal) -> asyncio.Task[None] | None:
        """Stop watching a call (it is over); its watch's task, to await, if it started."""
        if self._due.pop(cancel, None) is not None:
            return None
        task = self._tasks.pop(cancel, None)
        if task is not None:
            task.cancel()
        return task

    def _start_due(self) -> None:
        loop = self._loop
        assert loop is not None
        self._timer = None
        now = loop.time()
        while self._due:
            cancel, (receive, due) = next(iter(self._due.items()))
            if due > now:
                self._timer = loop.call_at(due, self._start_due)
                return
            del self._due[cancel]
            self._tasks[cancel] = loop.create_task(_watch(receive, cancel))


async def _watch(receive: Receive, cancel: CancelSignal) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    cancel.set()


def render_outcome(
    outcome: ToolOutcome,
    *,
    root_path: str,
    controls: InvocationControls | None,
    body: bytes,
) -> Response:
    """Map an outcome to its response: 200, 202, or a problem (DESIGN §5)."""
    if isinstance(outcome, Completed):
        headers = {"Idempotent-Replayed": "true"} if outcome.replayed else None
        return Response(_completed_content(outcome), media_type="application/json", headers=headers)
    if isinstance(outcome, Failed):
        response = failed_problem(outcome)
        if outcome.replayed:
            response.headers["Idempotent-Replayed"] = "true"
        return response
    if isinstance(outcome, Denied):
        return denied_problem(outcome)
    if isinstance(outcome, InteractionRequired):
        request_id = outcome.request_id or _request_id(controls, body)
        # The pause's own fields, by name, with the request id and controls to retry with.
        accepted = AcceptedBody.model_validate(outcome, from_attributes=True).model_copy(
            update={
                "request_id": request_id,
                "retry_with": outcome.continuation.controls() if outcome.continuation else None,
            }
        )
    else:
        assert isinstance(outcome, Deferred)
        request_id = _request_id(controls, body)
        accepted = AcceptedBody(kind="deferred", request_id=request_id, token=outcome.token)
    headers = {"Location": f"{root_path}/v1/actions/{request_id}"} if request_id else None
    return json_response(accepted, status_code=202, headers=headers)


def _completed_content(outcome: Completed) -> bytes:
    """A completed call's body: CallResultBody's shape, serialised directly.

    The output is already validated JSON data, and building the model would validate all
    of it again as JsonValue.
    """
    return to_json({"output": outcome.output, "replayed": outcome.replayed})


def _request_id(controls: InvocationControls | None, body: bytes) -> str | None:
    """The call's request id, from the header or else from ``_charter`` in the body.

    Only reached for 202 answers, after the host accepted the body, so it parses.
    """
    if controls is not None and controls.request_key is not None:
        return controls.request_key
    try:
        arguments: Any = json.loads(body)
        return canonical_uuid(arguments[CONTROL_FIELD]["requestId"])
    except (ValueError, KeyError, TypeError):
        return None
