"""charter's MCP server: the SDK's low-level ``Server`` over ``Host.discover`` and ``Host.invoke``.

``tools/list`` lists the tools the caller may call with their precomputed schemas;
``tools/call`` runs ``Host.invoke`` and renders the outcome. Resources, prompts and
completions are ``Host.content`` (``_content``). Policy, validation, scopes and the
ledger all stay in the host.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError

from .. import __version__
from .._mcp_config import STATUS_TOOL, check_reserved_names
from .._wording import canonical_uuid
from ..auth import Principal
from ..errors import ConfigurationError, ErrorCode
from ..host import CallOptions, Host
from ..outcome import Completed, Failed, InteractionRequired, ToolOutcome, failed
from ..policy import CONTROL_FIELD
from . import _interact
from ._auth import principal_from_scope
from ._changes import ToolListChanges
from ._content import NO_SESSION, ContentHandlers
from ._forwarded import forwarded_result, is_forwarded, render_forwarded
from ._interact import Ask, ConnectionState
from ._listen import Listening
from ._listing import ToolListing, refuse_cursor, status_tool
from ._render import Presenter, completed_wire, render_outcome
from ._tracing import trace_only_when_recording

__all__ = ("create_server",)

Context = ServerRequestContext[ConnectionState, Any]

_MAX_ROUNDS = 4
"""Elicitation rounds one ``tools/call`` may take (a confirmation, then a question)."""
_HEADER_ANNOTATION = "x-mcp-header"
"""The JSON Schema annotation that binds a tool argument to an ``Mcp-Param-*`` header."""


def create_server(
    host: Host,
    *,
    name: str = "charter",
    version: str = __version__,
    principal: Principal | None = None,
    presenters: Mapping[str, Presenter] | None = None,
    request_state_keys: Sequence[bytes | str] | None = None,
    instructions: str | None = None,
    sse_poll_after: float | None = None,
) -> Server[ConnectionState]:
    """Build an MCP server that exposes ``host``'s tools.

    Args:
        host: the host whose pipeline runs every call.
        name: the server name announced to clients.
        version: the server version announced to clients.
        principal: who calls over connections that carry no credentials (stdio, in
            memory). HTTP requests are always authenticated from their bearer token and
            never fall back to it. None: those connections are anonymous and see only
            public tools.
        presenters: per-tool renderers of completed output as MCP content (images,
            audio, embedded resources), keyed by canonical tool name.
        request_state_keys: secrets (at least 32 bytes each) that seal the
            ``requestState`` of 2026-07-28 elicitation round trips; give every replica
            the same keys. Default: a key held by this process only.
        instructions: optional server instructions for the client.
        sse_poll_after: over streamable HTTP with an event store, close a
            ``tools/call``'s SSE stream once the call has run this many seconds; the
            client reconnects with ``Last-Event-ID`` and gets the rest (SSE polling).

    Raises:
        ConfigurationError: a presenter names an unknown tool, or a registered tool uses
            the adapter's reserved ``charter.action_status`` name.
    """
    presenters = dict(presenters or {})
    unknown = sorted(n for n in presenters if host.registry.get(n) is None)
    if unknown:
        raise ConfigurationError(f"presenters name unknown tool(s) {unknown}; use canonical names")
    check_reserved_names(host.registry)
    adapter = _Adapter(host, principal=principal, presenters=presenters, poll_after=sse_poll_after)
    # 2026-07-28 clients hear of changes on subscriptions/listen streams.
    listening = Listening(host, principal_of=adapter.principal)
    adapter.changes.publish = listening.tools_changed
    # Tools registered or removed while serving (charter.gateway): clients are told.
    host.registry.on_change(adapter.changes.listener())
    content = ContentHandlers(host, principal_of=adapter.principal, session_of=_session_key)
    server: Server[ConnectionState] = Server(
        name,
        version=version,
        instructions=instructions,
        lifespan=_lifespan,
        on_list_tools=adapter.list_tools,
        get_tool_input_schema=adapter.input_schema,
        on_list_resources=content.list_resources,
        on_list_resource_templates=content.list_templates,
        on_read_resource=content.read_resource,
        on_subscribe_resource=content.subscribe,
        on_unsubscribe_resource=content.unsubscribe,
        on_list_prompts=content.list_prompts,
        on_get_prompt=content.get_prompt,
        on_completion=content.complete,
        on_subscriptions_listen=listening.listen,
    )
    # Registered directly: the constructor's on_set_logging_level warns that logging is
    # deprecated at 2026-07-28, but handshake-era clients still set levels.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, adapter.set_level)
    # Registered directly too (what ``on_call_tool`` does): a completed call is answered
    # with its result's wire form (``completed_wire``), which ``on_call_tool``'s type
    # does not name but the SDK's request handlers may return.
    server.add_request_handler("tools/call", types.CallToolRequestParams, adapter.call_tool)
    # Without shared keys, a key only this process holds (state minted before a restart,
    # or by another replica, is then refused).
    keys = list(request_state_keys) if request_state_keys else [secrets.token_bytes(32)]
    security = RequestStateSecurity(keys=keys, bind_principal=adapter.principal_key)
    server.middleware.append(RequestStateBoundary(security, default_audience=name))
    trace_only_when_recording(server.middleware)
    return server


@asynccontextmanager
async def _lifespan(_: Server[ConnectionState]) -> AsyncIterator[ConnectionState]:
    yield ConnectionState()


class _Adapter:
    """The handlers behind one server."""

    def __init__(
        self,
        host: Host,
        *,
        principal: Principal | None,
        presenters: dict[str, Presenter],
        poll_after: float | None = None,
    ) -> None:
        self.host = host
        self.poll_after = poll_after
        self._closing: set[asyncio.Future[None]] = set()
        self.default_principal = principal
        self.presenters = presenters
        self.listing = ToolListing()
        self.status = status_tool()
        self.changes = ToolListChanges(host)
        # Per tool name: its input schema, and whether it declares an Mcp-Param header.
        self._header_schemas: dict[str, tuple[Mapping[str, Any], bool]] = {}

    # -- who is calling -----------------------------------------------------------------

    def principal(self, ctx: Context) -> Principal | None:
        """The caller: from the bearer token on HTTP, else the configured principal."""
        if ctx.request is None:
            return self.default_principal
        return principal_from_scope(ctx.request.scope)

    def principal_key(self, ctx: Context) -> str | None:
        """Binds sealed ``requestState`` to the caller who minted it."""
        principal = self.principal(ctx)
        return None if principal is None else principal.key

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The tool's input schema, for the SDK's ``Mcp-Param-*`` header checks.

        None for a tool whose schema declares no header (no ``x-mcp-header`` anywhere in
        it): the SDK then checks nothing, as it would after walking the whole schema to
        find no annotated property (about 15 µs of a ``tools/call``, measured). Whether a
        schema declares one is found once per schema.
        """
        registered = self.host.registry.get(name)
        if registered is None:
            return None
        schema = registered.tool.input_schema
        known = self._header_schemas.get(name)
        if known is None or known[0] is not schema:
            known = self._header_schemas[name] = (schema, _declares_headers(schema))
        return schema if known[1] else None

    # -- handlers -----------------------------------------------------------------------

    async def list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """``tools/list``: the tools this caller may call (one page: a cursor is refused)."""
        refuse_cursor(params)
        principal = self.principal(ctx)
        key = _session_key(ctx)
        if key != _NO_SESSION:  # stateless HTTP has no channel to notify on
            self.changes.remember(ctx, key, principal)
        tools = [self.listing.tool(t) for t in self.host.callable_tools(principal)]
        if principal is not None:
            tools.append(self.status)
        return types.ListToolsResult(tools=tools)

    async def set_level(
        self, ctx: Context, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """``logging/setLevel`` (handshake-era clients): the minimum level for this session."""
        key = _session_key(ctx)
        if key != _NO_SESSION:
            ctx.lifespan_context.set_level(key, params.level)
        return types.EmptyResult()

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """``tools/call``: run the call through the host and render its outcome."""
        principal = self.principal(ctx)
        name = params.name
        arguments: dict[str, Any] = params.arguments if params.arguments is not None else {}
        if name == STATUS_TOOL and principal is not None:
            return render_outcome(await self._action_status(principal, arguments))
        key = _session_key(ctx)
        # No cancel signal of our own: the SDK cancels this task when the client cancels
        # (notifications/cancelled, or a closed stream), and the host sets the call's
        # ctx.cancel as the cancellation reaches the handler, which a sync handler in its
        # worker thread can poll.
        call = CallOptions(
            progress_sink=ctx.session.report_progress,
            log_sink=_interact.log_sink(ctx, None if key == _NO_SESSION else key, name),
            sampler=_interact.sampler(ctx),
            call_id=None if ctx.request_id is None else str(ctx.request_id),
        )
        poll = self._poll(ctx)
        try:
            if params.request_state is not None:
                result = await self._answered(ctx, params, arguments, principal, call)
            else:
                outcome = await self.host.invoke(name, arguments, principal, call=call)
                result = await self._interact(ctx, name, arguments, principal, call, outcome)
        finally:
            if poll is not None:
                poll.cancel()
        if isinstance(result, types.InputRequiredResult):
            return result
        return self._render(name, arguments, result)

    def _poll(self, ctx: Context) -> asyncio.TimerHandle | None:
        """Close this call's SSE stream after ``poll_after`` seconds, if it can resume."""
        close = ctx.close_sse_stream
        if self.poll_after is None or close is None:
            return None
        loop = asyncio.get_running_loop()

        # A timer, not a task group: the call's own errors must not become exception groups.
        def fire() -> None:
            task = asyncio.ensure_future(close())
            self._closing.add(task)  # held until done, so it is not collected mid-way
            task.add_done_callback(self._closing.discard)

        return loop.call_later(self.poll_after, fire)

    # -- interactions -------------------------------------------------------------------

    async def _interact(
        self,
        ctx: Context,
        name: str,
        arguments: dict[str, Any],
        principal: Principal | None,
        call: CallOptions,
        outcome: ToolOutcome,
    ) -> ToolOutcome | types.InputRequiredResult:
        """Ask the user mid-call while the outcome is a question they can answer."""
        for _ in range(_MAX_ROUNDS):
            if not isinstance(outcome, InteractionRequired):
                return outcome
            ask = _interact.ask_for(outcome)
            channel = _interact.elicitation_channel(ctx) if ask is not None else None
            if ask is None or channel is None:
                return outcome
            if channel == "input-required":
                return _interact.input_required(ask)
            answer = await _interact.elicit(ctx, ask)
            if answer is None:
                return outcome
            answered = await self._continue(name, arguments, principal, call, ask, answer)
            if answered is None:
                return outcome
            outcome = answered
        return outcome

    async def _answered(
        self,
        ctx: Context,
        params: types.CallToolRequestParams,
        arguments: dict[str, Any],
        principal: Principal | None,
        call: CallOptions,
    ) -> ToolOutcome | types.InputRequiredResult:
        """Continue a 2026-07-28 round trip: the retried call carries the user's answer."""
        # The SDK's RequestStateBoundary verified and unsealed the state: it is ours, it
        # was minted for this caller, this tool and these exact arguments.
        ask = _interact.decode_ask(params.request_state or "")
        answer = (params.input_responses or {}).get(_interact.ELICITATION_KEY)
        if ask is None or not isinstance(answer, types.ElicitResult):
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Retry with the inputResponses[{_interact.ELICITATION_KEY!r}] "
                "elicitation answer and the requestState this server returned",
            )
        outcome = await self._continue(params.name, arguments, principal, call, ask, answer)
        if outcome is None:
            # Dismissed: answer with the question's own outcome, without asking again.
            return await self.host.invoke(params.name, arguments, principal, call=call)
        return await self._interact(ctx, params.name, arguments, principal, call, outcome)

    async def _continue(
        self,
        name: str,
        arguments: dict[str, Any],
        principal: Principal | None,
        call: CallOptions,
        ask: Ask,
        answer: types.ElicitResult,
    ) -> ToolOutcome | None:
        """Continue the paused call with the user's answer; None when they dismissed it."""
        accepted = answer.action == "accept"
        if ask.kind == "response":
            return await self.host.resume(
                ask.paused,
                name,
                arguments,
                principal,
                approved=accepted,
                value=dict(answer.content or {}) if accepted else None,
                call=call,
            )
        if answer.action == "cancel":
            return None
        confirmed = accepted and (answer.content or {}).get("confirm") is True
        return await self.host.resume(
            ask.paused, name, arguments, principal, approved=confirmed, call=call
        )

    # -- rendering ------------------------------------------------------------------------

    def _render(
        self, name: str, arguments: Mapping[str, Any], outcome: ToolOutcome
    ) -> types.CallToolResult | dict[str, Any]:
        presenter = self.presenters.get(name) if isinstance(outcome, Completed) else None
        if presenter is None and isinstance(outcome, Completed) and self.presenters:
            # An alias names the same tool as its canonical name.
            registered = self.host.registry.get(name)
            presenter = self.presenters.get(registered.name) if registered is not None else None
        forwarded = forwarded_result(outcome)
        if forwarded is not None and isinstance(outcome, Completed | Failed):
            registered = self.host.registry.get(name)
            if registered is not None and is_forwarded(registered.tool):
                # Another MCP server's result (charter.gateway), its isError included:
                # sent back as it came.
                return render_forwarded(forwarded, replayed=outcome.replayed)
        if presenter is None and isinstance(outcome, Completed):
            wire = completed_wire(outcome)
            if wire is not None:
                return wire
        controls = arguments.get(CONTROL_FIELD)
        request_id = controls.get("requestId") if isinstance(controls, dict) else None
        try:
            return render_outcome(
                outcome,
                presenter=presenter,
                request_id=request_id if isinstance(request_id, str) else None,
            )
        except Exception:
            # A presenter bug must not become an opaque protocol error.
            return render_outcome(
                failed(
                    ErrorCode.PROVIDER_ERROR,
                    f"The result of {name!r} could not be presented.",
                    reason="presenter_failed",
                )
            )

    async def _action_status(
        self, principal: Principal, arguments: Mapping[str, Any]
    ) -> ToolOutcome:
        tenant = arguments.get("tenant")
        request_id = canonical_uuid(arguments.get("requestId"))
        if (
            request_id is None
            or not set(arguments) <= {"requestId", "tenant"}
            or (tenant is not None and (not isinstance(tenant, str) or not tenant.strip()))
        ):
            return failed(
                ErrorCode.INVALID_INPUT,
                f'{STATUS_TOOL} takes {{"requestId": "<uuid>"}} and an optional "tenant".',
                reason="invalid_status_query",
                issues=[],
            )
        status = await self.host.action_status(principal, request_id, tenant=tenant)
        if status is None:
            return failed(
                ErrorCode.NOT_FOUND,
                f"No request {request_id} of yours is known.",
                reason="request_not_found",
                next_steps=("Check the requestId; results are kept for the retention period.",),
            )
        return Completed(output=status.model_dump(mode="json"))


_NO_SESSION = NO_SESSION
"""A stateless HTTP request: it belongs to no session that could remember a log level."""


def _declares_headers(value: object) -> bool:
    """Whether ``x-mcp-header`` is a key anywhere in ``value`` (a JSON Schema).

    Anywhere, not only where the SDK looks for it: a false yes costs the SDK's own walk,
    a false no would skip a check.
    """
    if isinstance(value, Mapping):
        return _HEADER_ANNOTATION in value or any(_declares_headers(v) for v in value.values())
    if isinstance(value, list):
        return any(_declares_headers(v) for v in value)
    return False


def _session_key(ctx: Context) -> str | None:
    """Which connection a request belongs to, within the server's lifespan state."""
    request = ctx.request
    if request is None:
        return None  # stdio / in memory: the lifespan state is this connection's own
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        # Read from the ASGI headers: cheaper than Starlette's by-name look-up, same answer.
        for name, value in scope["headers"]:
            if name == _SESSION_HEADER:
                return str(value.decode("latin-1"))
        return _NO_SESSION
    session_id = request.headers.get("mcp-session-id")
    return session_id if isinstance(session_id, str) else _NO_SESSION


_SESSION_HEADER = b"mcp-session-id"
