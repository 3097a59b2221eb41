"""The gateway: upstream MCP servers' tools, registered as charter tools under charter's policy.

``Gateway(config, registry)`` is an async context manager. Entering it starts one
supervised connection per upstream (``Upstream``), waits for each first attempt, and
registers every listed tool the policy does not hide as ``<namespace>.<tool>``. While it
runs, a changed upstream listing (``tools/list_changed``, or a reconnect that lists
something else) replaces that upstream's tools in the registry and calls the gateway's
listeners. Every call to such a tool goes through the host like any other: the handler
only forwards the validated arguments and returns the upstream's result as it came.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp.types as types
from anyio.abc import TaskGroup
from pydantic_core import to_json

from ..context import ToolContext
from ..errors import ConfigurationError, ToolError
from ..mcp import ForwardedResult
from ..registry import Registry
from ..risk import RiskTier
from ..tool import NAME_PATTERN, Tool, ToolAnnotations, define_tool
from ._config import GatewayConfig, UpstreamConfig
from ._policy import govern
from ._schemas import UpstreamInput, input_model, result_model
from ._upstream import (
    DEFAULT_BACKOFF,
    LOST_MID_CALL,
    Backoff,
    Upstream,
    UpstreamHealth,
    UpstreamState,
)

__all__ = ("Gateway",)

logger = logging.getLogger("charter.gateway")


class Gateway:
    """Upstream MCP servers' tools in a charter registry, kept in step while it runs."""

    def __init__(
        self,
        config: GatewayConfig | Iterable[UpstreamConfig],
        registry: Registry,
        *,
        connect_timeout: float = 30.0,
        backoff: Backoff = DEFAULT_BACKOFF,
        ping_interval: float = 10.0,
    ) -> None:
        """Govern ``config``'s upstreams; their tools go into ``registry``.

        Args:
            config: the upstreams (``load_config(path)``, or ``UpstreamConfig`` objects).
            registry: the registry the host serves; tools are added and removed in it.
            connect_timeout: how long entering waits for each upstream's first connection;
                one that is not up by then is served once it connects.
            backoff: the waits between reconnection attempts.
            ping_interval: seconds between pings that check an idle connection.
        """
        if not isinstance(config, GatewayConfig):
            config = GatewayConfig.of(*config)
        self.config = config
        self.registry = registry
        self._connect_timeout = connect_timeout
        self._upstreams = {
            name: Upstream(
                upstream, on_tools=self._register, backoff=backoff, ping_interval=ping_interval
            )
            for name, upstream in config.upstreams.items()
        }
        self._registered: dict[str, dict[str, _Entry]] = {name: {} for name in self._upstreams}
        self._listeners: list[Callable[[], None]] = []
        self._stack: AsyncExitStack | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Gateway:
        """Connect every upstream (waiting up to ``connect_timeout`` for each) and register."""
        if self._stack is not None:
            raise RuntimeError("this Gateway is already running")
        async with AsyncExitStack() as stack:
            group: TaskGroup = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(group.cancel_scope.cancel)
            for upstream in self._upstreams.values():
                group.start_soon(upstream.run, name=f"charter upstream {upstream.name}")
            with anyio.move_on_after(self._connect_timeout):
                for upstream in self._upstreams.values():
                    await upstream.first_attempt()
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Disconnect every upstream (stdio servers are stopped); their tools stay registered."""
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    # -- what it shows ------------------------------------------------------------------------

    def health(self) -> list[UpstreamHealth]:
        """Each upstream's connection, in configuration order."""
        return [upstream.health() for upstream in self._upstreams.values()]

    @property
    def ready(self) -> bool:
        """Whether every upstream is connected."""
        return all(h.state == "connected" for h in self.health())

    async def wait_for(self, upstream: str, state: UpstreamState = "connected") -> None:
        """Wait until ``upstream``'s connection is in ``state`` (bound it with a timeout).

        Raises:
            KeyError: no upstream has that name.
        """
        await self._upstreams[upstream].reach(state)

    def tool_names(self, upstream: str | None = None) -> list[str]:
        """Charter names of the registered upstream tools (of one upstream, or all)."""
        names = [upstream] if upstream is not None else list(self._registered)
        return [tool for name in names for tool in self._registered.get(name, {})]

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` whenever upstream tools are added, changed or removed.

        Returns:
            A function that removes the listener.
        """
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    # -- registration -------------------------------------------------------------------------

    async def _register(self, upstream: Upstream, listed: list[types.Tool]) -> None:
        """Make the registry hold exactly ``upstream``'s visible tools, as listed now."""
        config = upstream.config
        by_name: dict[str, list[tuple[str, _Entry]]] = {}
        for tool in listed:
            entry = self._entry(upstream, tool)
            if entry is not None:
                by_name.setdefault(entry.name, []).append((tool.name, entry))
        wanted: dict[str, _Entry] = {}
        for name, entries in by_name.items():
            if len(entries) == 1:
                wanted[name] = entries[0][1]
                continue
            # Which one would run, and under whose policy, would be the listing's order.
            logger.warning(
                "upstream %s: tools %s all map to %r; none of them is served: rename one",
                config.name,
                ", ".join(repr(tool) for tool, _ in entries),
                name,
            )
        current = self._registered[config.name]
        changed = False
        for name, entry in list(current.items()):
            if wanted.get(name) != entry:
                self.registry.unregister(name)
                del current[name]
                changed = True
        for name, entry in wanted.items():
            if name in current:
                continue
            try:
                self.registry.register(entry.tool)
            except ConfigurationError as exc:
                logger.warning("upstream %s: tool %r not served: %s", config.name, name, exc)
                continue
            current[name] = entry
            changed = True
        if changed:
            logger.info("upstream %s: %d tools registered", config.name, len(current))
            for listener in list(self._listeners):
                listener()

    def _entry(self, upstream: Upstream, tool: types.Tool) -> _Entry | None:
        """The charter tool for one listed upstream tool; None when hidden or unservable."""
        config = upstream.config
        policy = config.policy_for(tool.name)
        if policy.hidden:
            return None
        name = f"{config.effective_namespace}.{policy.rename or tool.name}"
        if not NAME_PATTERN.fullmatch(name):
            logger.warning(
                "upstream %s: tool %r not served: %r is not a valid charter tool name",
                config.name,
                tool.name,
                name,
            )
            return None
        # What the registration depends on: a listing that repeats it changes nothing.
        signature = to_json(
            [tool.model_dump(mode="json", by_alias=True, exclude_none=True), policy.model_dump()]
        )
        try:
            return _Entry(name=name, signature=signature, tool=_declare(upstream, tool, name))
        except ConfigurationError as exc:
            logger.warning("upstream %s: tool %r not served: %s", config.name, tool.name, exc)
            return None


class _Entry:
    """A registered upstream tool and the listing it was made from."""

    __slots__ = ("name", "signature", "tool")

    def __init__(self, *, name: str, signature: bytes, tool: Tool[Any, Any, Any]) -> None:
        self.name = name
        self.signature = signature
        self.tool = tool

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Entry) and (self.name, self.signature) == (
            other.name,
            other.signature,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.signature))


def _declare(upstream: Upstream, listed: types.Tool, name: str) -> Tool[Any, Any, Any]:
    """A charter tool whose handler forwards the validated arguments to the upstream.

    Raises:
        ConfigurationError: the upstream's schema or the policy cannot make a charter tool.
    """
    config = upstream.config
    policy = config.policy_for(listed.name)
    governed = govern(listed, policy, target_type=config.effective_namespace)
    upstream_name = listed.name

    async def forward(arguments: UpstreamInput, ctx: ToolContext) -> ForwardedResult:
        # Exactly the validated arguments: what the fingerprint, and any approval, bound.
        result = await upstream.call(upstream_name, arguments.sent(), ctx)
        return output.from_result(result)

    async def forward_once(arguments: UpstreamInput, ctx: ToolContext) -> ForwardedResult:
        # A ledgered call reaches the upstream once. A timeout or a broken connection
        # once it was sent leaves its outcome unknown: that is answered as a result the
        # ledger keeps, so a retry with the same requestId replays it, not the write.
        with anyio.move_on_after(config.timeout) as waited:
            try:
                return await forward(arguments, ctx)
            except ToolError as exc:
                if (exc.meta or {}).get("reason") != LOST_MID_CALL:
                    raise
                what = "lost the connection during the call"
        if waited.cancelled_caught:
            what = f"did not answer within {config.timeout:g} s"
        return output.from_result(_unknown_outcome(config.name, upstream_name, what))

    output = result_model(name, listed.output_schema)
    ledgered = governed["tier"] is not RiskTier.READ
    title = listed.title or (listed.annotations.title if listed.annotations else None)
    return define_tool(
        name=name,
        description=policy.description or listed.description or f"{upstream_name} on {config.name}",
        input_schema=input_model(name, dict(listed.input_schema)),
        output_schema=output,
        handler=forward_once if ledgered else forward,
        **governed,
        owner=config.name,
        annotations=ToolAnnotations(title=title) if title else None,
        # A ledgered call bounds its own wait (forward_once), so the host's timeout, which
        # rolls back and frees the request id, never cuts it short first; and a caller who
        # leaves does not either: once sent, the call runs on and its outcome is recorded.
        timeout=None if ledgered else config.timeout,
        cancellable=not ledgered,
    )


def _unknown_outcome(upstream: str, tool: str, what: str) -> types.CallToolResult:
    """The recorded answer of a call the upstream may or may not have run."""
    text = (
        f"[OUTCOME_UNKNOWN] The upstream {upstream!r} {what} to {tool!r}; it may have done "
        "the work. This answer is recorded for this requestId, so a retry with it will not "
        "call the upstream again: check the upstream's state, then use a new requestId to "
        "try again."
    )
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)
