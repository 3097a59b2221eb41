"""What sessions keep in the harness's process is bounded, and forgotten when they stop."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from harness_support import ALICE, World, calls

from charter import ConfigurationError
from charter.harness import Harness, ModelRequest, ModelResponse, Respond, TurnResult
from charter.harness.live import DEFAULT_MAX_LIVE_SESSIONS
from charter.harness.testing import FunctionModel

pytestmark = pytest.mark.anyio


def one_call_then_text(tool_for: dict[str, tuple[str, dict[str, Any]]]) -> FunctionModel:
    """A model that answers a prompt with one call (by session id) and its result with text.

    Sessions not in ``tool_for`` add an item to their cart.
    """

    def step(request: ModelRequest) -> ModelResponse:
        if request.messages[-1].role != "user":
            return ModelResponse(text="done")
        name, args = tool_for.get(request.session_id, ("add_item", {"item": "x"}))
        return calls((name, "c1", args))

    return FunctionModel(step)


def cart_count(result: TurnResult) -> object:
    """The cart size the turn's last ``add_item`` call reported."""
    outputs = [r.output for r in result.results if r.tool_name == "add_item"]
    assert outputs, result
    return outputs[-1]


async def test_sessions_run_to_completion_keep_at_most_max_live_sessions(world: World) -> None:
    # Catches a harness that keeps every session it ever ran (the leak this bound fixes).
    harness = world.harness(one_call_then_text({}), max_live_sessions=3)
    for n in range(20):
        result = await harness.session(ALICE, f"s{n}").run("add")
        assert result.status == "completed"

    assert len(harness.live) == 3
    assert [s for s in (f"s{n}" for n in range(20)) if s in harness.live] == ["s17", "s18", "s19"]
    assert world.states_created == 20


async def test_a_running_sessions_cancel_still_works_while_other_sessions_are_forgotten(
    world: World,
) -> None:
    # Catches eviction that drops a session whose run is in progress: its cancel signal
    # would be gone and session.cancel() would reach nothing (the turn would run 10 s).
    harness = world.harness(one_call_then_text({"a": ("async_wait", {})}), max_live_sessions=2)
    running = harness.session(ALICE, "a")
    outcome: list[TurnResult] = []

    async def run_a() -> None:
        outcome.append(await running.run("wait"))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_a)
            await world.entered_event("async_wait").wait()
            for n in range(5):
                done = await harness.session(ALICE, f"s{n}").run("add")
                assert done.status == "completed"
            assert "a" in harness.live
            assert len(harness.live) == 2  # the running one and the most recent idle one
            running.cancel()

    (result,) = outcome
    assert result.status == "cancelled"
    assert [(r.tool_name, r.kind) for r in result.results] == [("async_wait", "failed")]
    assert len(harness.live) == 2


async def test_capability_state_survives_between_turns_of_a_kept_session(world: World) -> None:
    # Catches state forgotten after every turn (count back to 1) and a bound that evicts
    # the most recently run session instead of the least recently run one.
    harness = world.harness(one_call_then_text({}), max_live_sessions=2)
    kept = harness.session(ALICE, "kept")

    assert cart_count(await kept.run("add")) == {"count": 1}
    await harness.session(ALICE, "other").run("add")
    assert cart_count(await kept.run("add")) == {"count": 2}
    await harness.session(ALICE, "third").run("add")  # forgets "other", run before "kept"
    assert cart_count(await kept.run("add")) == {"count": 3}
    assert "other" not in harness.live


async def test_a_forgotten_session_continues_with_fresh_state_like_a_resume_elsewhere(
    world: World,
) -> None:
    # A paused session is idle here: the bound may forget it, and its resume then runs
    # as a resume in another process would: same record, fresh capability state.
    def step(request: ModelRequest) -> ModelResponse:
        if request.session_id == "paused" and len(request.messages) == 1:
            ask = ("ask_user", "c2", {"question": "?"})
            return calls(("add_item", "c1", {"item": "tent"}), ask)
        if request.session_id == "paused" and len(request.messages) == 3:
            return calls(("add_item", "c3", {"item": "stove"}))
        if request.messages[-1].role == "user":
            return calls(("add_item", "c1", {"item": "x"}))
        return ModelResponse(text="done")

    harness = world.harness(FunctionModel(step), max_live_sessions=2)
    session = harness.session(ALICE, "paused")
    paused = await session.run("pack and ask")
    assert paused.status == "paused"
    for n in range(2):
        await harness.session(ALICE, f"s{n}").run("add")
    assert "paused" not in harness.live

    done = await session.resume(Respond(interaction_id="ask-1", value="yes"))

    assert done.status == "completed"
    assert cart_count(done) == {"count": 1}  # the tent is in the forgotten state
    assert [m.role for m in await session.messages()][:3] == ["user", "assistant", "tool"]


async def test_stopping_an_idle_session_forgets_its_state(world: World) -> None:
    harness = world.harness(one_call_then_text({}))
    session = harness.session(ALICE, "s1")
    assert cart_count(await session.run("add")) == {"count": 1}

    stopped = await session.stop()

    assert stopped.status == "cancelled"
    assert "s1" not in harness.live
    assert cart_count(await session.run("add")) == {"count": 1}  # a fresh cart


async def test_stopping_a_running_session_forgets_its_state_once_the_run_ends(
    world: World,
) -> None:
    harness = world.harness(one_call_then_text({"a": ("async_wait", {})}))
    session = harness.session(ALICE, "a")
    outcome: list[TurnResult] = []

    async def run() -> None:
        outcome.append(await session.run("wait"))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await world.entered_event("async_wait").wait()
            assert (await session.stop()).status == "cancelled"
            assert "a" in harness.live  # the run still ends itself with its signal

    assert outcome[0].status == "cancelled"
    assert "a" not in harness.live


async def test_max_live_sessions_has_a_documented_default_and_must_be_positive(
    world: World,
) -> None:
    assert world.harness(one_call_then_text({})).live.max_sessions == DEFAULT_MAX_LIVE_SESSIONS
    with pytest.raises(ConfigurationError, match="max_live_sessions"):
        Harness(world.host, one_call_then_text({}), max_live_sessions=0)
