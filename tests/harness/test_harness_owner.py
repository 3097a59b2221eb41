"""A session is its principal's: another principal's handle can neither stop, cancel nor read it.

Ownership is the record's subject *and* tenant, so the same subject in another tenant is
another principal, as is another subject in the same tenant (and no principal at all).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

import anyio
import pytest
from harness_support import ALICE, BOB, World, calls

from charter import Principal
from charter.harness import (
    ModelResponse,
    Respond,
    ResumeCodes,
    Session,
    SessionRecord,
    SessionStore,
    TurnResult,
)
from charter.harness.testing import ScriptedModel

pytestmark = pytest.mark.anyio

ALICE_ELSEWHERE = Principal(subject="alice", tenant_id="t2", scopes=ALICE.scopes)
"""Alice's subject in another tenant: not the owner of Alice's sessions in ``t1``."""

ALICE_AGAIN = Principal(subject="alice", tenant_id="t1", scopes=frozenset())
"""The owner again, authenticated anew with other scopes: the same subject and tenant."""

OTHERS = [
    pytest.param(ALICE_ELSEWHERE, id="same-subject-other-tenant"),
    pytest.param(BOB, id="other-subject-same-tenant"),
    pytest.param(None, id="anonymous"),
]


def waiting_model() -> ScriptedModel:
    """A model that calls ``wait_for`` (until the test opens gate ``g``), then answers."""
    return ScriptedModel([calls(("wait_for", "c1", {"name": "g"})), ModelResponse(text="done")])


async def run_while(
    world: World, owner: Session, during: Callable[[], Awaitable[None]], *, release: bool = True
) -> TurnResult:
    """Run ``owner`` on ``waiting_model``; once its tool waits, await ``during``.

    Then open the tool's gate (unless ``release`` is False: ``during`` ended the run) and
    return the run's result.
    """
    outcome: list[TurnResult] = []

    async def run() -> None:
        outcome.append(await owner.run("wait"))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await world.entered_event("g").wait()
            await during()
            if release:
                world.gate("g").set()
    (result,) = outcome
    return result


async def interfere(intruder: Session, action: Literal["cancel", "stop"]) -> None:
    """Call ``cancel()`` or ``stop()`` on another principal's handle."""
    if action == "cancel":
        intruder.cancel()
    else:
        refused = await intruder.stop()
        assert (refused.status, refused.code) == ("rejected", ResumeCodes.FORBIDDEN)


@pytest.mark.parametrize("action", ["cancel", "stop"])
@pytest.mark.parametrize("other", OTHERS)
async def test_another_principals_cancel_or_stop_leaves_a_run_in_progress_running_to_completion(
    world: World, other: Principal | None, action: Literal["cancel", "stop"]
) -> None:
    # Catches cancel() and stop() acting on the session id alone: the owner's run would
    # end "cancelled" with wait_for failed instead of completing.
    harness = world.harness(waiting_model())

    result = await run_while(
        world, harness.session(ALICE, "s1"), lambda: interfere(harness.session(other, "s1"), action)
    )

    assert (result.status, result.text) == ("completed", "done")
    assert [(r.tool_name, r.kind) for r in result.results] == [("wait_for", "completed")]
    assert world.count("wait_for") == 1
    assert "s1" in harness.live  # not forgotten by the other's stop


@pytest.mark.parametrize("other", OTHERS)
async def test_another_principals_stop_leaves_a_paused_session_resumable_by_its_owner(
    world: World, other: Principal | None
) -> None:
    model = ScriptedModel(
        [
            calls(("add_item", "c1", {"item": "tent"}), ("ask_user", "c2", {"question": "?"})),
            calls(("add_item", "c3", {"item": "stove"})),
            ModelResponse(text="packed"),
        ]
    )
    harness = world.harness(model)
    owner = harness.session(ALICE, "s1")
    assert (await owner.run("pack and ask")).status == "paused"
    intruder = harness.session(other, "s1")

    refused = await intruder.stop()
    intruder.cancel()

    assert (refused.status, refused.code) == ("rejected", ResumeCodes.FORBIDDEN)
    assert await intruder.messages() == ()  # the paused transcript is not theirs to read
    assert await intruder.record() is None
    done = await owner.resume(Respond(interaction_id="ask-1", value="yes"))
    assert (done.status, done.text) == ("completed", "packed")
    # The cart was not forgotten: the stove (c3) is its second item.
    carts = [(r.call_id, r.output) for r in done.results if r.tool_name == "add_item"]
    assert carts == [("c1", {"count": 1}), ("c3", {"count": 2})]


@pytest.mark.parametrize("other", OTHERS)
async def test_the_owner_stops_a_run_another_principal_could_not_stop(
    world: World, other: Principal | None
) -> None:
    # The owner is a subject in a tenant, not a handle: a new handle of the same subject
    # and tenant (other scopes) stops the run, and reads the transcript.
    harness = world.harness(waiting_model())

    async def refused_then_stopped_by_the_owner() -> None:
        intruder = harness.session(other, "s1")
        refused = await intruder.stop()
        intruder.cancel()
        assert (refused.status, refused.code) == ("rejected", ResumeCodes.FORBIDDEN)
        assert (await harness.session(ALICE_AGAIN, "s1").stop()).status == "cancelled"

    result = await run_while(
        world, harness.session(ALICE, "s1"), refused_then_stopped_by_the_owner, release=False
    )

    assert result.status == "cancelled"
    assert [(r.tool_name, r.kind) for r in result.results] == [("wait_for", "failed")]
    assert "s1" not in harness.live
    assert [m.role for m in await harness.session(ALICE_AGAIN, "s1").messages()] == [
        "user",
        "assistant",
        "tool",
    ]


@pytest.mark.parametrize("other", OTHERS)
async def test_another_principal_reads_nothing_of_a_session_not_even_that_it_exists(
    world: World, other: Principal | None
) -> None:
    model = ScriptedModel([calls(("add", "c1", {"a": 2, "b": 3})), ModelResponse(text="5")])
    harness = world.harness(model)
    assert (await harness.session(ALICE, "s1").run("2 + 3?")).status == "completed"
    intruder = harness.session(other, "s1")

    assert await intruder.messages() == ()
    assert await intruder.record() is None
    # Exactly what a session that was never stored reads as, for its owner too.
    assert await intruder.messages() == await harness.session(ALICE, "new").messages()
    assert await harness.session(ALICE, "new").record() is None
    owned = await harness.session(ALICE_AGAIN, "s1").record()
    assert owned is not None and (owned.subject, owned.tenant_id) == ("alice", "t1")
    assert len(await harness.session(ALICE_AGAIN, "s1").messages()) == 4


class ExpiringStore:
    """A session store whose records can expire (as with a TTL), so an id can be reused."""

    def __init__(self) -> None:
        self.records: dict[str, SessionRecord] = {}

    async def load(self, session_id: str) -> SessionRecord | None:
        return self.records.get(session_id)

    async def save(self, record: SessionRecord, *, expected_revision: int | None) -> bool:
        current = self.records.get(record.session_id)
        if (current.revision if current is not None else None) != expected_revision:
            return False
        self.records[record.session_id] = record
        return True

    def expire(self, session_id: str) -> None:
        del self.records[session_id]


async def test_a_reused_session_id_does_not_hand_over_the_previous_owners_capability_state(
    world: World,
) -> None:
    # Catches in-process state kept by session id alone: Bob's cart would hold Alice's tent.
    store = ExpiringStore()
    typed: SessionStore = store
    model = ScriptedModel(
        [
            calls(("add_item", "c1", {"item": "tent"})),
            ModelResponse(text="ok"),
            calls(("add_item", "c1", {"item": "stove"})),
            ModelResponse(text="ok"),
        ]
    )
    harness = world.harness(model, store=typed)
    first = await harness.session(ALICE, "s1").run("add")
    assert [r.output for r in first.results] == [{"count": 1}]
    store.expire("s1")

    second = await harness.session(BOB, "s1").run("add")

    assert [r.output for r in second.results] == [{"count": 1}]
    assert world.states_created == 2
