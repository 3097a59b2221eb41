"""A session: one conversation of one principal, run turn by turn, paused and resumed.

``Session.run`` starts a turn (``turn.py``); a call that needs a person
(``InteractionRequired``) or continues elsewhere (``Deferred``) pauses it, the step is
saved in the ``SessionStore``, and ``Session.resume`` continues it (``resume.py``), in
this process or another. Every run and resume first claims the session's record
(``lease.py``), so two of them never run the same session at once.

A session is its principal's: every method acts only on a session whose record has the
handle's subject and tenant (``SessionLease``). On another principal's session, ``run``,
``resume`` and ``stop`` are rejected with ``execution.forbidden``, ``cancel`` does
nothing, and ``messages`` and ``record`` read it as a session that does not exist.
"""

from __future__ import annotations

from ..auth import Principal
from .lease import SessionLease
from .messages import Message, UserMessage
from .resume import resume_turn
from .runtime import Runtime
from .store import SessionRecord
from .turn import Turn
from .turns import Decision, Rejected, TurnResult

__all__ = ("Session",)


class Session:
    """One conversation of one principal; its record lives in the harness's store.

    A handle acts only on a session its principal owns: same subject and same tenant as
    the stored record (no principal: ``anonymous`` in tenant ``""``). Another principal's
    session is rejected (``run``, ``resume``, ``stop``), left alone (``cancel``) or read
    as missing (``messages``, ``record``).
    """

    def __init__(self, harness: Runtime, principal: Principal | None, session_id: str) -> None:
        """Bind a session id to its principal (use ``Harness.session``)."""
        self.harness = harness
        self.principal = principal
        self.id = session_id
        self._lease = SessionLease(
            harness,
            session_id=session_id,
            subject=principal.subject if principal is not None else "anonymous",
            tenant_id=principal.tenant_id if principal is not None else "",
        )

    async def run(self, prompt: str) -> TurnResult:
        """Start a turn with ``prompt``; returns when the model answers, or the turn pauses."""
        try:
            record = await self._lease.acquire(for_turn=True)
        except Rejected as rejected:
            return rejected.result(self.id)
        turn = self._turn(record, None)
        return await turn.run(UserMessage(content=prompt))

    async def resume(self, decision: Decision) -> TurnResult:
        """Continue a paused turn with an approval, an answer, or a deferred call's outcome.

        A decision that matches no open interaction (stale, already used, or of the wrong
        kind) is rejected without executing anything or calling the model. Of two
        concurrent resumes of the same pause, one wins and the other gets a conflict.
        """
        try:
            record = await self._lease.load_owned()
            turn = await resume_turn(
                self.harness,
                lease=self._lease,
                principal=self.principal,
                record=record,
                decision=decision,
            )
        except Rejected as rejected:
            return rejected.result(self.id)
        return await turn.continue_step()

    async def stop(self) -> TurnResult:
        """Stop the session, settling what is open as ``tool.cancelled``.

        A run in this process is cancelled; a paused step's open calls are settled as
        ``tool.cancelled`` without calling the model. The session's capability state in
        this process is forgotten (once a run in progress has ended): a later run of it
        starts with fresh state.

        Another principal's session is left as it is (its run goes on, its pause stays
        resumable): the result is ``rejected`` with ``execution.forbidden``, as ``run``'s.
        """
        owner = self._lease.owner
        live = self.harness.live.get(self.id, owner)
        if live is not None and live.cancel is not None and not live.cancel.is_set():
            # The run in progress here ends itself as cancelled, settling its calls.
            live.cancel.set()
            self.harness.live.forget(self.id, owner)
            return TurnResult(status="cancelled", session_id=self.id)
        try:
            record = await self._lease.load_owned()
            if record.pending is None:
                self.harness.live.forget(self.id, owner)
                return TurnResult(status="cancelled", session_id=self.id)
            # Paused, or left running by a process that died (once its lease is over).
            claimed = await self._lease.claim(record)
        except Rejected as rejected:
            return rejected.result(self.id)
        turn = self._turn(claimed, claimed.pending.turn_id if claimed.pending else None)
        result = await turn.cancel_open(claimed.pending)
        if result.status == "cancelled":
            self.harness.live.forget(self.id, owner)
        return result

    def cancel(self) -> None:
        """Cancel the run or resume in progress in this process (tools see ``ctx.cancel``).

        Does nothing when no run of the session is in progress here, and to another
        principal's run: ``stop`` says which (``execution.forbidden``).
        """
        live = self.harness.live.get(self.id, self._lease.owner)
        if live is not None and live.cancel is not None:
            live.cancel.set()

    async def messages(self) -> tuple[Message, ...]:
        """The transcript so far; empty for a new session and for another principal's."""
        record = await self._lease.read()
        return record.messages if record is not None else ()

    async def record(self) -> SessionRecord | None:
        """The stored record (for inspection and tests); None if not stored, or not yours."""
        return await self._lease.read()

    def _turn(self, record: SessionRecord, turn_id: str | None) -> Turn:
        return Turn(
            self.harness,
            lease=self._lease,
            principal=self.principal,
            record=record,
            turn_id=turn_id,
        )
