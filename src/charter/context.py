"""What a handler sees of the call: who, for which tenant, with which services and signals."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._safe_log import log_exception
from .errors import ConfigurationError, ErrorCode, ToolError

if TYPE_CHECKING:
    from .auth import Principal
    from .policy import HandlerActionPolicy

logger = logging.getLogger("charter")

__all__ = (
    "AfterCommit",
    "CancelSignal",
    "EffectStager",
    "LogLevel",
    "LogSink",
    "ProgressSink",
    "ResumeInfo",
    "SampleRequest",
    "SampleResult",
    "Sampler",
    "SamplingRole",
    "ToolContext",
    "discard_after_commit",
    "run_after_commit",
)

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical"]

ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]
"""Receives ``(progress, total, message)``; a transport turns it into a notification."""

LogSink = Callable[[LogLevel, str, Mapping[str, Any] | None], Awaitable[None]]
"""Receives ``(level, message, data)``; a transport turns it into a log notification."""

SamplingRole = Literal["user", "assistant"]
"""Who said a message in a ``SampleRequest``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleRequest:
    """A completion the tool asks the caller's model for (MCP sampling, for example)."""

    messages: tuple[tuple[SamplingRole, str], ...]
    """The conversation so far, as ``(role, text)`` pairs."""
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleResult:
    """What the caller's model answered."""

    text: str
    model: str | None = None
    """The model that answered, when the transport says."""
    stop_reason: str | None = None


Sampler = Callable[[SampleRequest], Awaitable[SampleResult]]
"""Runs a ``SampleRequest`` on the caller's model; set by a transport that can do so.

It raises ``ToolError`` when the caller refuses or fails.
"""

AfterCommit = Callable[[], Awaitable[object]]
"""Work to run once the call's transaction has committed."""

EffectStager = Callable[[str, object], str]
"""Stages one effect (name, payload) in the call's transaction and returns its key; set by
the ledger gate."""


async def run_after_commit(work: list[AfterCommit | Awaitable[object]], tool: str) -> None:
    """Run the work a handler registered with ``wait_until``, each item on its own.

    The call has already taken effect, so a failing item is logged and never turns the
    outcome into a failure (a caller would retry an action that happened); the items
    after it still run.
    """
    pending = list(work)
    work.clear()
    for item in pending:
        try:
            await (item if inspect.isawaitable(item) else item())
        except Exception:
            log_exception(logger, "work %r registered with wait_until failed after the call", tool)


def discard_after_commit(work: list[AfterCommit | Awaitable[object]]) -> None:
    """Drop registered work after a rollback, closing coroutines so none leaks."""
    for item in work:
        close = getattr(item, "close", None)
        if inspect.iscoroutine(item) and close is not None:
            close()
    work.clear()


class CancelSignal:
    """A cancellation flag that async handlers can await and sync handlers can poll.

    The host sets it when the caller cancels, the call times out or the session
    stops. A sync handler running in a worker thread checks ``is_set()`` (or waits
    with ``wait_sync``); an async handler may ``await cancel.wait()``.
    """

    __slots__ = ("_callbacks", "_event", "_lock", "_set")

    def __init__(self) -> None:
        # Every call gets a signal and almost none is ever waited on in a thread, so the
        # threading.Event (the costly part) is made only when ``wait_sync`` needs one.
        self._set = False
        self._event: threading.Event | None = None
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def is_set(self) -> bool:
        """Return True once cancellation was requested."""
        return self._set

    def set(self) -> None:
        """Request cancellation; runs every subscribed callback once, from any thread."""
        with self._lock:
            if self._set:
                return
            self._set = True
            event = self._event
            callbacks, self._callbacks = self._callbacks, []
        if event is not None:
            event.set()
        for callback in callbacks:
            callback()

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when the signal is set (now, if it already is); return an unsubscriber.

        The callback may run in any thread; it must be quick and thread-safe.
        """
        with self._lock:
            if not self._set:
                self._callbacks.append(callback)
                return functools.partial(self._unsubscribe, callback)
        callback()
        return lambda: None

    def _unsubscribe(self, callback: Callable[[], None]) -> None:
        with self._lock:
            try:
                self._callbacks.remove(callback)
            except ValueError:  # already fired and cleared: nothing to drop
                pass

    async def wait(self) -> None:
        """Wait until cancellation is requested."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)

        unsubscribe = self.subscribe(wake)
        try:
            await future
        finally:
            unsubscribe()

    def wait_sync(self, timeout: float | None = None) -> bool:
        """Block a worker thread until cancellation or ``timeout``; return whether set."""
        with self._lock:
            event = self._event
            if event is None:
                event = self._event = threading.Event()
                if self._set:
                    event.set()
        return event.wait(timeout)

    def raise_if_set(self) -> None:
        """Raise ``ToolError(CANCELLED)`` if cancellation was requested."""
        if self._set:
            raise ToolError(ErrorCode.CANCELLED, "The call was cancelled.")


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(frozen=True, kw_only=True, slots=True)
class ResumeInfo:
    """The decision or answer a paused call resumes with."""

    interaction_id: str
    kind: Literal["approval", "response"]
    approved: bool | None = None
    """For approvals: the decision. For responses: False when the person declined to answer."""
    value: object = None
    """For responses: the person's answer."""
    token: object = None
    """The token the tool returned with its ``InteractionRequired``."""


@dataclass(kw_only=True)
class ToolContext:
    """The per-call context handed to a handler; domains subclass it to add services.

    ``class TravelContext(ToolContext): trips: TripService`` — the subclass's own
    fields may be required, since every field here has a default.
    """

    tenant_id: str = ""
    """The effective tenant (the caller's, or the delegated one)."""
    actor: str | None = None
    """The caller's actor type (``staff``, ``customer``, ``partner``, ``supplier``)."""
    audience: str | None = None
    """The audience the call was made for."""
    principal: Principal | None = None
    """The authenticated caller, or None for anonymous calls to public tools."""
    delegated: bool = False
    """True when an admin acts for another tenant through a delegable tool."""
    request_id: str | None = None
    """The caller's request id (the ledger key), when given."""
    db: Any = None
    """The database connection of the call's transaction (ledgered calls on a SQL store)."""
    db_error: Callable[[Exception], ToolError | None] | None = None
    """Set with ``db``: names a transient database error the handler let escape from its
    own statements (a lock wait, a lost connection) so the caller is told to retry."""
    handler_action_policy: HandlerActionPolicy | None = None
    """Minted by the host for handler-enforced tools only; never taken from a caller."""
    session_id: str | None = None
    turn_id: str | None = None
    step_id: str | None = None
    call_id: str | None = None
    invocation_id: str | None = None
    cancel: CancelSignal = field(default_factory=CancelSignal)
    state: Any = None
    """Session-local capability state (harness)."""
    resume: ResumeInfo | None = None
    """Set when a paused call resumes."""
    progress_sink: ProgressSink | None = None
    log_sink: LogSink | None = None
    sampler: Sampler | None = None
    """Set by transports that can ask the caller's model (MCP sampling); see ``sample()``."""
    after_commit: list[AfterCommit | Awaitable[object]] = field(default_factory=list)
    """Work registered with ``wait_until``; the host runs it after commit."""
    effect_stager: EffectStager | None = None
    """Set by the ledger gate for a ledgered call; never taken from a context factory."""

    def wait_until(self, work: AfterCommit | Awaitable[object]) -> None:
        """Run ``work`` after the call's transaction commits (never if it rolls back).

        Best effort: lost if the process dies after the commit. Work that must happen
        (a refund, an email) is an effect: ``ctx.effect`` (docs/effects.md).
        """
        self.after_commit.append(work)

    def effect(self, name: str, payload: object = None) -> str:
        """Record the effect ``name`` with ``payload`` in this call's transaction.

        The row commits with the ledger entry and the handler's writes, or not at all;
        charter then runs the registered ``@charter.effect`` function after the commit
        and, should that fail or the process die, from ``charter worker`` with retries,
        passing an idempotency key derived from the tenant, the caller, the request id,
        the name and the effect's place in the call (docs/effects.md).

        Args:
            name: a registered effect's name (``payments.refund``).
            payload: JSON data or a pydantic model (dumped as JSON; secrets stay masked).

        Returns:
            The effect's idempotency key (the one its function will be given).

        Raises:
            ConfigurationError: the call is not ledgered (no request id, so nothing to
                commit with), the name is not registered, or the payload is not JSON.
        """
        if self.effect_stager is None:
            raise ConfigurationError(
                f"ctx.effect({name!r}) needs a ledgered call: the tool's action policy must "
                "ledger it and the caller must send a request id (docs/effects.md)"
            )
        return self.effect_stager(name, payload)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress to the caller, when its transport can show it."""
        if self.progress_sink is not None:
            await self.progress_sink(progress, total, message)

    async def log(
        self, level: LogLevel, message: str, data: Mapping[str, Any] | None = None
    ) -> None:
        """Send a log message to the caller, when its transport can show it."""
        if self.log_sink is not None:
            await self.log_sink(level, message, data)

    async def sample(
        self,
        prompt: str | Sequence[tuple[SamplingRole, str]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
    ) -> SampleResult:
        """Ask the caller's model for a completion, through the caller's transport.

        Args:
            prompt: a user message, or the conversation as ``(role, text)`` pairs.
            max_tokens: the most tokens the model may produce.
            system_prompt: an optional system prompt.
            temperature: an optional sampling temperature.

        Returns:
            The model's answer.

        Raises:
            ToolError: ``MISSING_SERVICE`` when the caller's transport cannot sample
                (no MCP sampling capability, or a connection without a back-channel);
                otherwise whatever the transport raised for a refused or failed request.
        """
        if self.sampler is None:
            raise ToolError(
                ErrorCode.MISSING_SERVICE,
                "This tool asks the caller's model for a completion, and the caller's "
                "client cannot answer sampling requests.",
                next_steps=(
                    "Call this tool from a client that supports sampling (MCP "
                    "sampling/createMessage over stdio or stateful streamable HTTP).",
                ),
                meta={"reason": "sampling_unavailable"},
            )
        messages = (("user", prompt),) if isinstance(prompt, str) else tuple(prompt)
        request = SampleRequest(
            messages=messages,
            max_tokens=max_tokens,
            system_prompt=system_prompt,
            temperature=temperature,
        )
        return await self.sampler(request)
