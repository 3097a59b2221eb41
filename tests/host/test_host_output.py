"""Output handling and failures inside the pipeline: nothing a handler or the server did
wrong leaks to the caller (O01, O02); every failure is an outcome, never an exception."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from pydantic import BaseModel
from tests.builders import tiered_tool

from charter import Principal, RegisteredTool, Registry, ToolContext
from charter.errors import ErrorCode, ToolError
from charter.host import Host
from charter.ledger import MemoryStore
from charter.outcome import Completed, Failed
from charter.policy import InvocationControls
from charter.risk import RiskTier

pytestmark = pytest.mark.anyio

CANARY = "CANARY-7f3c9b1e"
DSN = f"postgresql://app:{CANARY}@db.internal:5432/prod"
PRINCIPAL = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset())


class Ask(BaseModel):
    mode: str


class User(BaseModel):
    user_id: str
    name: str


class UserWithSecret(User):
    password_hash: str


def _bad_output(mode: str) -> Any:
    if mode == "extra_field":
        return {"user_id": "u1", "name": "Ada", "password_hash": CANARY}
    if mode == "extra_attribute":
        return UserWithSecret(user_id="u1", name="Ada", password_hash=CANARY)
    if mode == "wrong_type":
        return {"user_id": ["u1", CANARY], "name": "Ada"}
    if mode == "missing_field":
        return {"name": CANARY}
    if mode == "not_a_model":
        return CANARY
    if mode == "raise":
        raise RuntimeError(f"connection to {DSN} failed: SELECT * FROM users -- {CANARY}")
    if mode == "raise_key_error":
        raise KeyError(CANARY)
    return User(user_id="u1", name="Ada")


def _registry() -> Registry:
    registry = Registry()

    async def async_handler(ask: Ask) -> User:
        return _bad_output(ask.mode)  # type: ignore[no-any-return]

    def sync_handler(ask: Ask) -> User:
        return _bad_output(ask.mode)  # type: ignore[no-any-return]

    handlers: tuple[tuple[str, Any, RiskTier], ...] = (
        ("get_user", async_handler, RiskTier.READ),
        ("get_user_sync", sync_handler, RiskTier.READ),
        ("save_user", async_handler, RiskTier.WRITE),
    )
    for name, handler, tier in handlers:
        registry.register(tiered_tool(name, tier, handler, Ask, User))
    return registry


def _arguments(tool: str, mode: str) -> dict[str, Any]:
    arguments: dict[str, Any] = {"mode": mode}
    if tool == "save_user":
        arguments["_charter"] = {"requestId": str(uuid.uuid4())}
    return arguments


async def _no_leak(host: Host, outcome: object) -> Failed:
    assert isinstance(outcome, Failed)
    assert CANARY not in outcome.model_dump_json()
    for event in await host.audit.events():
        assert CANARY not in event.model_dump_json()
    assert outcome.meta is not None and str(outcome.meta["errorId"]).startswith("err_")
    return outcome


async def _failed_call(
    tool: str, mode: str, caplog: pytest.LogCaptureFixture
) -> tuple[Failed, MemoryStore]:
    """Call ``tool`` in ``mode`` on a new host, logging errors: its failure, and its store."""
    store = MemoryStore()
    host = Host(_registry(), store=store)
    with caplog.at_level(logging.ERROR, logger="charter"):
        outcome = await host.invoke(tool, _arguments(tool, mode), PRINCIPAL)
    return await _no_leak(host, outcome), store


@pytest.mark.parametrize("tool", ["get_user", "get_user_sync", "save_user"])
@pytest.mark.parametrize(
    "mode", ["extra_field", "extra_attribute", "wrong_type", "missing_field", "not_a_model"]
)
async def test_output_that_breaks_the_schema_is_invalid_output_and_never_shown(
    tool: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    failed, store = await _failed_call(tool, mode, caplog)
    assert failed.code is ErrorCode.INVALID_OUTPUT
    assert failed.retryable is False
    # The error id ties the caller's answer to the server's log, which names the problem
    # by location and kind only.
    assert str((failed.meta or {})["errorId"]) in caplog.text
    assert CANARY not in caplog.text
    # A ledgered call whose output was invalid is rolled back.
    assert store.entries == {}


@pytest.mark.parametrize("tool", ["get_user", "get_user_sync", "save_user"])
@pytest.mark.parametrize("mode", ["raise", "raise_key_error"])
async def test_a_handler_exception_is_a_generic_provider_error_without_its_message(
    tool: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    failed, store = await _failed_call(tool, mode, caplog)
    assert failed.code is ErrorCode.PROVIDER_ERROR
    assert failed.reason == "unhandled_exception"
    assert "postgresql" not in failed.message and "SELECT" not in failed.message
    # The details stay in the server's log, under the same error id.
    assert str((failed.meta or {})["errorId"]) in caplog.text
    assert CANARY in caplog.text
    assert store.entries == {}


async def test_valid_output_is_returned_in_its_serialised_form() -> None:
    host = Host(_registry())
    outcome = await host.invoke("get_user", {"mode": "ok"}, PRINCIPAL)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"user_id": "u1", "name": "Ada"}


# -- failures inside the pipeline are outcomes too --------------------------------------


async def test_a_context_factory_that_raises_becomes_a_provider_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def factory(
        principal: Principal | None, registered: RegisteredTool, controls: InvocationControls
    ) -> ToolContext:
        raise RuntimeError(f"cannot connect to {DSN}")

    host = Host(_registry(), context_factory=factory)
    with caplog.at_level(logging.ERROR, logger="charter"):
        outcome = await host.invoke("get_user", {"mode": "ok"}, PRINCIPAL)
    failed = await _no_leak(host, outcome)
    assert failed.code is ErrorCode.PROVIDER_ERROR
    assert str((failed.meta or {})["errorId"]) in caplog.text and CANARY in caplog.text
    # Exactly one audit event still records the call.
    events = await host.audit.events()
    assert [(e.tool, e.code) for e in events] == [("get_user", "PROVIDER_ERROR")]


async def test_a_tool_error_from_the_context_factory_keeps_its_code() -> None:
    async def factory(
        principal: Principal | None, registered: RegisteredTool, controls: InvocationControls
    ) -> ToolContext:
        raise ToolError(ErrorCode.MISSING_SERVICE, "The trips service is not configured.")

    host = Host(_registry(), context_factory=factory)
    outcome = await host.invoke("get_user", {"mode": "ok"}, PRINCIPAL)
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.MISSING_SERVICE
    assert outcome.message == "The trips service is not configured."


async def test_the_context_factory_receives_the_principal_the_tool_and_the_controls() -> None:
    received: list[tuple[Principal | None, str, str | None]] = []

    class AppContext(ToolContext):
        pass

    contexts: list[ToolContext] = []

    def factory(
        principal: Principal | None, registered: RegisteredTool, controls: InvocationControls
    ) -> ToolContext:
        received.append((principal, registered.name, controls.request_key))
        return AppContext()

    registry = _registry()

    async def capture(ask: Ask, ctx: ToolContext) -> User:
        contexts.append(ctx)
        return User(user_id="u1", name="Ada")

    registry.register(
        tiered_tool("capture", "write", capture, Ask, User, description="Captures its context.")
    )
    host = Host(registry, context_factory=factory)
    rid = str(uuid.uuid4())
    outcome = await host.invoke(
        "capture", {"mode": "ok", "_charter": {"requestId": rid}}, PRINCIPAL
    )
    assert isinstance(outcome, Completed)
    assert received == [(PRINCIPAL, "capture", rid)]
    [ctx] = contexts
    assert isinstance(ctx, AppContext)
    assert (ctx.tenant_id, ctx.principal, ctx.actor, ctx.request_id) == (
        "tenant-a",
        PRINCIPAL,
        "staff",
        rid,
    )
    assert ctx.invocation_id


# -- work registered with wait_until runs after the call and cannot fail it ---------------


def _after_commit_registry(ran: list[str]) -> Registry:
    registry = Registry()

    async def failing() -> None:
        raise RuntimeError(f"webhook to {DSN} failed")

    async def succeeding() -> None:
        ran.append("second")

    async def handler(ask: Ask, ctx: ToolContext) -> User:
        ctx.wait_until(failing())
        ctx.wait_until(succeeding)
        return User(user_id="u1", name="Ada")

    for name, tier in (
        ("notify_read", RiskTier.READ),
        ("notify_write", RiskTier.WRITE),
    ):
        registry.register(tiered_tool(name, tier, handler, Ask, User))
    return registry


async def test_failing_after_commit_work_never_fails_a_call_that_took_effect(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []
    host = Host(_after_commit_registry(ran))
    with caplog.at_level(logging.ERROR, logger="charter"):
        outcome = await host.invoke("notify_read", {"mode": "ok"}, PRINCIPAL)
    assert isinstance(outcome, Completed)
    assert ran == ["second"]
    assert CANARY in caplog.text
    assert [e.outcome for e in await host.audit.events()] == ["completed"]


async def test_failing_after_commit_work_never_fails_a_committed_ledgered_call() -> None:
    ran: list[str] = []
    host = Host(_after_commit_registry(ran))
    outcome = await host.invoke(
        "notify_write", {"mode": "ok", "_charter": {"requestId": str(uuid.uuid4())}}, PRINCIPAL
    )
    assert isinstance(outcome, Completed)
    assert ran == ["second"]
    assert [e.outcome for e in await host.audit.events()] == ["completed"]
