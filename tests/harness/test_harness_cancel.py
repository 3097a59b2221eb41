"""Session-level cancellation reaches async and sync handlers; every call gets a result."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import anyio
import pytest
from harness_support import ALICE, AddIn, AddOut, World, calls
from tests.builders import tiered_tool

from charter import ToolContext
from charter.harness import ModelRequest, ModelResponse, SealCodes, Session, TurnResult
from charter.harness.testing import FunctionModel, ScriptedModel
from charter.risk import RiskTier

pytestmark = pytest.mark.anyio


async def wait_in_thread(event: threading.Event, timeout: float = 5.0) -> bool:
    """Wait for a ``threading.Event`` without blocking the event loop."""
    return await anyio.to_thread.run_sync(event.wait, timeout)


async def cancelled_turn(session: Session, started: Callable[[], Awaitable[None]]) -> TurnResult:
    """Run one turn of ``session``, cancelling the session once ``started()`` returns."""

    async def cancel_once_started() -> None:
        await started()
        session.cancel()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_once_started)
            result = await session.run("go")
    return result


async def test_cancelling_a_session_reaches_an_async_handler(world: World) -> None:
    model = ScriptedModel([calls(("async_wait", "c1", {}), ("add", "c2", {"a": 1, "b": 1}))])
    session = world.harness(model).session(ALICE)

    async def started() -> None:
        await world.entered_event("async_wait").wait()

    result = await cancelled_turn(session, started)
    assert result.status == "cancelled"
    assert [(r.call_id, r.kind, r.code) for r in result.results] == [
        ("c1", "failed", SealCodes.CANCELLED),
        ("c2", "completed", None),
    ]
    assert len(model.requests) == 1  # no model step after the cancel


async def test_cancelling_a_session_reaches_a_sync_handler_through_ctx_cancel(
    world: World,
) -> None:
    # Catches cancellation that only cancels the awaiting task: a sync handler in a
    # worker thread never notices (pydantic-ai's documented behaviour) and would block
    # in wait_sync for its full 10 s instead of returning at once.
    model = ScriptedModel([calls(("sync_wait", "c1", {}))])
    session = world.harness(model).session(ALICE)

    async def started() -> None:
        assert await wait_in_thread(world.sync_started)

    result = await cancelled_turn(session, started)
    assert await wait_in_thread(world.sync_saw_cancel)
    assert result.status == "cancelled"
    assert [(r.kind, r.code) for r in result.results] == [("failed", SealCodes.CANCELLED)]


async def test_cancelling_during_a_model_step_ends_the_turn_without_waiting_for_it(
    world: World,
) -> None:
    started = asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        started.set()
        await asyncio.sleep(30)
        return ModelResponse(text="too late")

    session = world.harness(FunctionModel(slow)).session(ALICE)

    async def model_started() -> None:
        await started.wait()

    result = await cancelled_turn(session, model_started)
    assert result.status == "cancelled"
    assert result.text is None
    # The session can take the next turn.
    record = await session.record()
    assert record is not None and record.status == "idle"


async def test_a_cancelled_turn_pairs_every_call_in_the_transcript(world: World) -> None:
    # Providers reject a transcript where a tool call has no result; the next turn's
    # model step must see one for each.
    model = ScriptedModel(
        [
            calls(("async_wait", "c1", {}), ("sync_wait", "c2", {})),
            ModelResponse(text="next turn"),
        ]
    )
    session = world.harness(model).session(ALICE)

    async def both_started() -> None:
        await world.entered_event("async_wait").wait()
        await wait_in_thread(world.sync_started)

    first = await cancelled_turn(session, both_started)
    with anyio.fail_after(5):
        second = await session.run("again")

    assert first.status == "cancelled"
    assert second.text == "next turn"
    tool_messages = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [r.call_id for r in tool_messages[0].results] == ["c1", "c2"]


@pytest.mark.parametrize("swallows", [False, True], ids=["plain", "swallowing"])
async def test_cancelling_the_task_during_a_model_step_cancels_the_task(
    world: World, swallows: bool
) -> None:
    # Only the session's signal ends a turn as "cancelled"; cancelling the task that runs
    # it propagates, even when the model swallows its own cancellation.
    started = asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            if not swallows:
                raise
        return ModelResponse(text="too late")

    session = world.harness(FunctionModel(slow)).session(ALICE)
    with anyio.fail_after(5):
        task = asyncio.ensure_future(session.run("go"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_run_whose_task_is_cancelled_mid_call_is_stopped_with_what_the_call_did(
    world: World,
) -> None:
    # Not session.cancel(): the task awaiting run() is cancelled (an asyncio.timeout around
    # it, a web request whose client left). The step was written before its calls ran, and
    # the lease is given up, so stop() at once settles the call with what the ledger
    # committed; the transcript never hides an action that ran.
    runs: list[int] = []
    done = asyncio.Event()

    async def send(args: AddIn, ctx: ToolContext) -> AddOut:
        runs.append(args.a)
        world.entered_event("send").set()
        await asyncio.sleep(0.3)  # a payment provider's answer
        done.set()
        return AddOut(sum=args.a + args.b)

    world.registry.register(
        tiered_tool("send", RiskTier.WRITE, send, AddIn, AddOut, cancellable=False)
    )
    model = ScriptedModel([calls(("send", "c1", {"a": 1, "b": 2})), ModelResponse(text="ok")])
    session = world.harness(model).session(ALICE, "s1")
    with anyio.fail_after(10):
        running = asyncio.ensure_future(session.run("pay"))
        await world.entered_event("send").wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await done.wait()
        await asyncio.sleep(0.05)  # its commit
        refused = await session.run("and then?")
        stopped = await session.stop()
        after = await session.run("and then?")
    # Until stop() settles the cut step, a new run is refused, saying why and what to do.
    assert (refused.status, refused.code) == ("rejected", "execution.paused")
    assert refused.reason is not None
    assert "cut short" in refused.reason and "stop it" in refused.reason
    assert stopped.status == "cancelled"
    assert [(r.call_id, r.kind, r.replayed) for r in stopped.results] == [("c1", "completed", True)]
    assert runs == [1]
    assert after.status == "completed"
    # The model's next request carries the call and its result.
    last = model.requests[-1].messages
    assert any(getattr(m, "results", None) for m in last)
