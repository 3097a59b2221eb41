"""A real webhook receiver on 127.0.0.1, a travel-shaped approval tool, and helpers."""

from __future__ import annotations

import base64
import queue
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, Field, SecretStr
from standardwebhooks import Webhook as Verifier
from standardwebhooks import WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from tests.builders import booking_policy, destructive_risk

from charter import (
    ErrorCode,
    InteractionRequired,
    Principal,
    Registry,
    ToolError,
    tool,
)
from charter.host import Host
from charter.notify import ApprovalEvent
from charter.outcome import ToolOutcome

SECRET = "whsec_" + base64.b64encode(b"charter-notify-test-secret-32by!").decode()
CARD = "tok_4242_never_shown"

PROVIDER_DOWN: list[bool] = []
"""Push ``True`` to make the next ``bookings.refund`` fail (its transaction rolls back)."""

SCOPES = frozenset({"bookings:refund"})
ALICE = Principal(subject="alice", tenant_id="acme", scopes=SCOPES)
ADA = Principal(subject="ada", tenant_id="acme", scopes=frozenset({"charter:approve"}))
# Another tenant's caller with the same subject: its events must never reach acme's receiver.
ALICE_GLOBEX = Principal(subject="alice", tenant_id="globex", scopes=SCOPES)
GUS = Principal(subject="gus", tenant_id="globex", scopes=frozenset({"charter:approve"}))


class RefundRequest(BaseModel):
    """A refund on a booking (the travel demo's shape, plus a note and a card token)."""

    booking_id: str = Field(min_length=1, max_length=40)
    amount_cents: int = Field(gt=0, le=10_000_000)
    note: str = Field(default="", max_length=20_000)
    card_token: SecretStr | None = None


class Refund(BaseModel):
    """The refund as recorded."""

    booking_id: str
    refunded_cents: int


@tool(
    tier="destructive",
    risk_policy=destructive_risk("refund"),
    name="bookings.refund",
    required_scopes=["bookings:refund"],
    capability_id="travel.bookings.refund",
    capability_version="1.0.0",
    action_policy=booking_policy(confirmation="required", approval="required"),
)
async def refund_booking(args: RefundRequest) -> Refund:
    """Refund part of a booking. Needs a person's approval before it runs."""
    if PROVIDER_DOWN:
        PROVIDER_DOWN.pop()
        raise ToolError(ErrorCode.PROVIDER_UNAVAILABLE, "The payment provider is down.")
    return Refund(booking_id=args.booking_id, refunded_cents=args.amount_cents)


def registry() -> Registry:
    """A registry with ``bookings.refund``."""
    reg = Registry()
    reg.register(refund_booking)
    return reg


def refund(request_id: str, approval_id: str | None = None, **values: Any) -> dict[str, Any]:
    """``bookings.refund`` arguments, confirmed, for one request."""
    controls: dict[str, Any] = {"requestId": request_id, "confirmed": True}
    if approval_id is not None:
        controls["approvalId"] = approval_id
    return {"booking_id": "bk_1", "amount_cents": 1250, **values, "_charter": controls}


def approval_id_of(outcome: ToolOutcome) -> str:
    """The approval id a paused call names."""
    assert isinstance(outcome, InteractionRequired), outcome
    assert outcome.approval_id is not None
    return outcome.approval_id


async def request_refund(host: Host, principal: Principal = ALICE) -> str:
    """Ask ``host`` for a fresh refund as ``principal``; the id of the approval it waits for."""
    return approval_id_of(await host.invoke("bookings.refund", refund(rid()), principal))


def approval_event(**changes: Any) -> ApprovalEvent:
    """A valid ``requested`` event of approval ``apr_1`` (a refund in acme), with ``changes``."""
    values: dict[str, Any] = {
        "id": "evt_1",
        "kind": "requested",
        "approval_id": "apr_1",
        "tenant_id": "acme",
        "request_id": "0b0c6f5e-4f0e-4b8e-9a57-0d9c5b1c9a11",
        "tool": "bookings.refund",
        "capability_version": "1.0.0",
        "risk": "high",
        "target": "bk_1",
        "arguments": {"booking_id": "bk_1", "amount_cents": 1250},
        "requester": "acme/alice",
        "created_at": datetime(2030, 1, 1, tzinfo=UTC),
        "expires_at": datetime(2030, 1, 1, 1, tzinfo=UTC),
        "occurred_at": datetime(2030, 1, 1, tzinfo=UTC),
        "url": "https://charter.example.com/console/#/approvals/apr_1",
    }
    values.update(changes)
    return ApprovalEvent.model_validate(values)


def rid() -> str:
    """A fresh request id."""
    return str(uuid.uuid4())


class Receiver:
    """Webhook endpoints that verify with the reference library and dedupe by ``webhook-id``.

    ``/fail/{n}`` answers 503 to the first ``n`` attempts at each event.
    """

    def __init__(self, secret: str = SECRET) -> None:
        self.verifier = Verifier(secret)
        self.attempts: Counter[tuple[str, str]] = Counter()
        self.accepted: dict[str, list[dict[str, Any]]] = {}
        self.rejected: list[str] = []
        self.slack: list[dict[str, Any]] = []
        self._seen: set[tuple[str, str]] = set()
        self._queues: dict[str, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route("/hooks/{name}", self.hook, methods=["POST"]),
                Route("/fail/{n:int}", self.failing, methods=["POST"]),
                Route("/slack/{name}", self.slack_hook, methods=["POST"]),
            ]
        )

    def _queue(self, name: str) -> queue.Queue[dict[str, Any]]:
        with self._lock:
            return self._queues.setdefault(name, queue.Queue())

    async def _take(self, name: str, request: Request) -> Response:
        body = await request.body()
        event_id = request.headers.get("webhook-id", "")
        with self._lock:
            self.attempts[(name, event_id)] += 1
        try:
            payload = self.verifier.verify(body, dict(request.headers))
        except WebhookVerificationError as exc:
            self.rejected.append(str(exc))
            return Response(status_code=401)
        with self._lock:
            duplicate = (name, event_id) in self._seen
            self._seen.add((name, event_id))
            if not duplicate:
                self.accepted.setdefault(name, []).append(payload)
        if not duplicate:
            self._queue(name).put(payload)
        return Response(status_code=204)

    async def hook(self, request: Request) -> Response:
        return await self._take(request.path_params["name"], request)

    async def failing(self, request: Request) -> Response:
        limit = request.path_params["n"]
        name = f"fail{limit}"
        event_id = request.headers.get("webhook-id", "")
        if self.attempts[(name, event_id)] < limit:
            with self._lock:
                self.attempts[(name, event_id)] += 1
            return Response(status_code=503)
        return await self._take(name, request)

    async def slack_hook(self, request: Request) -> Response:
        payload = await request.json()
        name = "slack:" + request.path_params["name"]
        self.slack.append(payload)
        self._queue(name).put(payload)
        return Response(b"ok", media_type="text/plain")

    async def next(self, name: str, timeout: float = 30) -> dict[str, Any]:
        """The next event accepted at ``name`` (fails if none comes within ``timeout``)."""
        got = self._queue(name)
        return await anyio.to_thread.run_sync(lambda: got.get(True, timeout))

    def next_sync(self, name: str, timeout: float = 30) -> dict[str, Any]:
        """``next``, blocking this thread."""
        return self._queue(name).get(True, timeout)

    def pending(self, name: str) -> int:
        """Events accepted at ``name`` and not yet taken with ``next``."""
        return self._queue(name).qsize()


@contextmanager
def receiving() -> Iterator[tuple[Receiver, str]]:
    """A receiver under uvicorn on a free 127.0.0.1 port, and its base URL."""
    from live_server import serve

    receiver = Receiver()
    with serve(receiver.app) as base:
        yield receiver, base
