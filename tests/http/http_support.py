"""Test support for the HTTP transport: small tools of every tier, principals, a live server."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

import httpx
from mcp import Client
from pydantic import BaseModel, Field
from tests.builders import destructive_risk, mcp_http_client, risk

from charter import (
    ActionPolicy,
    Deferred,
    ErrorCode,
    Registry,
    ToolContext,
    ToolError,
    tool,
)
from charter.auth import Principal, StaticAuthenticator
from charter.host import Host
from charter.http import create_app
from live_server import serve as serve  # re-exported for this package's tests

CANARY = "CANARY-7f3a9c"

# The servers are plain HTTP; one shared context spares each client loading the CA bundle.
_TLS = ssl.create_default_context()


# -- principals -------------------------------------------------------------------------------

AGENT_SCOPES = frozenset({"trips:read", "trips:write", "bookings:refund"})
AGENT = Principal(
    subject="agent-7",
    tenant_id="acme",
    scopes=AGENT_SCOPES,
    kind="agent",
    display_name="Traveller agent",
)
APPROVER_SCOPES = frozenset({"charter:approve", "trips:read"})
APPROVER = Principal(
    subject="ana", tenant_id="acme", scopes=APPROVER_SCOPES, display_name="Ana (staff approver)"
)
ADMIN = Principal(subject="root", tenant_id="ops", scopes=frozenset({"admin"}))
GLOBEX_AGENT = Principal(subject="agent-9", tenant_id="globex", scopes=AGENT_SCOPES, kind="agent")
GLOBEX_APPROVER = Principal(
    subject="gus", tenant_id="globex", scopes=frozenset({"charter:approve"})
)
LAB = Principal(subject="lab", tenant_id="acme", scopes=frozenset({"lab:run"}))
WILDCARD = Principal(subject="wanda", tenant_id="acme", scopes=frozenset({"*", "charter:*"}))
"""A person whose wildcard grants satisfy every scope check, but never the approver's."""
BOT_APPROVER = Principal(
    subject="bot", tenant_id="acme", scopes=frozenset({"charter:approve"}), kind="agent"
)
"""An agent holding the approver scope literally: still not a person."""

TOKENS = {
    "agent-token": AGENT,
    "approver-token": APPROVER,
    "admin-token": ADMIN,
    "globex-token": GLOBEX_AGENT,
    "globex-approver-token": GLOBEX_APPROVER,
    "lab-token": LAB,
    "wildcard-token": WILDCARD,
    "bot-approver-token": BOT_APPROVER,
}


@asynccontextmanager
async def mcp_client(url: str, token: str) -> AsyncIterator[Client]:
    """The SDK's client on the server at ``url``'s ``/mcp``, sending ``token`` as a bearer."""
    async with mcp_http_client(url + "/mcp", token) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


PROBLEM = "application/problem+json"
"""The content type of every error answer (RFC 9457 problem details)."""


def assert_problem(response: httpx.Response, status: int, /, **fields: object) -> dict[str, Any]:
    """Assert that ``response`` is a ``status`` problem document holding ``fields``; its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM, response.text
    problem: dict[str, Any] = response.json()
    assert {name: problem.get(name) for name in fields} == fields, problem
    return problem


def assert_challenged(
    client: httpx.Client, routes: Sequence[tuple[str, str]], challenge: str
) -> list[httpx.Response]:
    """Assert that each ``(method, path)`` in ``routes`` answers ``client`` 401 with
    ``challenge`` as its ``WWW-Authenticate``; the answers, for the caller's own checks."""
    answers = [client.request(method, path) for method, path in routes]
    for (method, path), response in zip(routes, answers, strict=True):
        assert response.status_code == 401, (method, path, response.text)
        assert response.headers["www-authenticate"] == challenge, (method, path)
    return answers


# -- tools ------------------------------------------------------------------------------------

TripId = Annotated[str, Field(pattern=r"^trp_[a-z0-9]{1,12}$")]


class Empty(BaseModel):
    pass


class Pong(BaseModel):
    pong: bool


class Place(BaseModel):
    city: str
    country: str


class Trip(BaseModel):
    trip_id: str
    name: str
    destination: Place


class TripQuery(BaseModel):
    query: str = Field(max_length=100)
    limit: int = Field(default=5, ge=1, le=20)


class TripList(BaseModel):
    trips: list[Trip]


class Rename(BaseModel):
    trip_id: TripId
    name: str = Field(min_length=1, max_length=80)


class Renamed(BaseModel):
    trip_id: str
    name: str


class CancelTrip(BaseModel):
    trip_id: TripId


class Cancelled(BaseModel):
    trip_id: str
    cancelled: bool


class Refund(BaseModel):
    booking_id: str = Field(pattern=r"^bkg_[a-z0-9]{1,12}$")
    amount_cents: int = Field(ge=1, le=10_000_000)


class Refunded(BaseModel):
    booking_id: str
    refunded_cents: int


class Transfer(BaseModel):
    trip_id: TripId
    to_traveller: str = Field(pattern=r"^tvl_[a-z0-9]{1,12}$")
    note: str | None = Field(default=None, max_length=200)


class Transferred(BaseModel):
    trip_id: str
    owner: str


class FailWith(BaseModel):
    code: ErrorCode


class Key(BaseModel):
    key: str


class Done(BaseModel):
    key: str
    done: bool


@dataclass
class Gate:
    """Lets a test hold a handler mid-call (set from the server's worker thread)."""

    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)


@dataclass
class Lab:
    """What the handlers did, for tests to inspect."""

    runs: Counter[str] = field(default_factory=Counter)
    gates: dict[str, Gate] = field(default_factory=dict)

    def gate(self, key: str) -> Gate:
        return self.gates.setdefault(key, Gate())


def build_registry(lab: Lab) -> Registry:
    write_risk = risk("data-write")
    trip: dict[str, Any] = {"target_type": "trip", "command_target_field": "trip_id"}
    booking: dict[str, Any] = {"target_type": "booking", "command_target_field": "booking_id"}
    gated: dict[str, Any] = {"approval": "required", "confirmation": "required"}

    @tool(name="catalog.ping", tier="read", auth="public")
    def ping(arguments: Empty) -> Pong:
        """Check that the catalog answers."""
        return Pong(pong=True)

    @tool(name="trips.search", tier="read", required_scopes=["trips:read"], aliases=["trips.find"])
    def search(arguments: TripQuery) -> TripList:
        """Search the caller's trips."""
        trip = Trip(trip_id="trp_1", name="Lisbon", destination=Place(city="Lisbon", country="PT"))
        return TripList(trips=[trip][: arguments.limit])

    @tool(
        name="trips.rename",
        tier="write",
        risk_policy=write_risk,
        required_scopes=["trips:write"],
        action_policy=ActionPolicy(**trip),
    )
    def rename(arguments: Rename) -> Renamed:
        """Rename a trip."""
        lab.runs[f"rename:{arguments.trip_id}"] += 1
        return Renamed(trip_id=arguments.trip_id, name=arguments.name)

    @tool(
        name="trips.cancel",
        tier="sensitive",
        risk_policy=destructive_risk("data-write"),
        required_scopes=["trips:write"],
        action_policy=ActionPolicy(**trip, confirmation="required"),
    )
    def cancel(arguments: CancelTrip) -> Cancelled:
        """Cancel a trip; the user must confirm."""
        lab.runs[f"cancel:{arguments.trip_id}"] += 1
        return Cancelled(trip_id=arguments.trip_id, cancelled=True)

    @tool(
        name="bookings.refund",
        tier="destructive",
        risk_policy=destructive_risk("refund"),
        required_scopes=["bookings:refund"],
        action_policy=ActionPolicy(**booking, **gated, risk="critical"),
    )
    def refund(arguments: Refund) -> Refunded:
        """Refund a booking to the card it was paid with."""
        lab.runs[f"refund:{arguments.booking_id}"] += 1
        return Refunded(booking_id=arguments.booking_id, refunded_cents=arguments.amount_cents)

    @tool(
        name="trips.transfer",
        tier="destructive",
        risk_policy=risk("data-write", "email", destructive=True),
        required_scopes=["trips:write"],
        action_policy=ActionPolicy(**trip, approval="required", risk="high"),
    )
    def transfer(arguments: Transfer) -> Transferred:
        """Hand a trip over to another traveller's account."""
        lab.runs[f"transfer:{arguments.trip_id}"] += 1
        return Transferred(trip_id=arguments.trip_id, owner=arguments.to_traveller)

    # Tools that fail on purpose; only the lab principal (scope lab:run) sees them.
    lab_read: dict[str, Any] = {"tier": "read", "required_scopes": ["lab:run"]}
    lab_write: dict[str, Any] = {
        "tier": "write",
        "risk_policy": write_risk,
        "required_scopes": ["lab:run"],
        "action_policy": ActionPolicy(target_type="lab", command_target_field="key"),
    }

    @tool(name="lab.fail", **lab_read)
    def fail(arguments: FailWith) -> Done:
        """Fail with the given code."""
        raise ToolError(arguments.code, f"failing with {arguments.code} {CANARY}")

    @tool(name="lab.crash", **lab_read)
    def crash(arguments: Empty) -> Done:
        """Raise an unexpected exception."""
        raise RuntimeError(f"postgresql://user:{CANARY}@db/prod")

    @tool(name="lab.bad_output", **lab_read)
    def bad_output(arguments: Empty) -> Done:
        """Return output that breaks the output schema."""
        return {"key": CANARY, "done": "not-a-bool", "password_hash": CANARY}  # type: ignore[return-value]

    @tool(name="lab.slow", **lab_write)
    def slow(arguments: Key) -> Done:
        """Block until the test releases it."""
        gate = lab.gate(arguments.key)
        gate.started.set()
        gate.release.wait(10)
        lab.runs[f"slow:{arguments.key}"] += 1
        return Done(key=arguments.key, done=True)

    @tool(name="lab.hang", **lab_read)
    async def hang(arguments: Key, ctx: ToolContext) -> Done:
        """Wait until the call is cancelled."""
        gate = lab.gate(arguments.key)
        gate.started.set()
        try:
            await ctx.cancel.wait()
        finally:  # the host cancels the handler's task when ctx.cancel fires
            gate.cancelled.set()
        return Done(key=arguments.key, done=False)

    @tool(name="lab.timeout", timeout=0.2, **lab_read)
    async def forever(arguments: Key) -> Done:
        """Never finish; times out."""
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    @tool(name="lab.defer", **lab_write)
    def defer(arguments: Key) -> Done | Deferred:
        """Continue elsewhere."""
        return Deferred()

    registry = Registry()
    registry.register_all([ping, search, rename, cancel, refund, transfer])
    registry.register_all([fail, crash, bad_output, slow, hang, forever, defer])
    return registry


def build_host(lab: Lab, **options: Any) -> Host:
    return Host(
        build_registry(lab),
        authenticator=StaticAuthenticator(TOKENS),
        in_progress_wait=0.2,
        **options,
    )


# -- a live server ----------------------------------------------------------------------------


@dataclass
class Live:
    """A running server, its host and what its handlers did."""

    url: str
    host: Host
    lab: Lab

    def client(
        self, token: str | None = None, *, headers: dict[str, str] | None = None
    ) -> httpx.Client:
        sent = {**(bearer(token) if token is not None else {}), **(headers or {})}
        return httpx.Client(base_url=self.url, headers=sent, timeout=10, verify=_TLS)


def serve_standard_app(**options: Any) -> Iterator[Live]:
    """The standard app (``create_app`` with ``options``) on a fresh lab, while it serves.

    A fixture's body: ``yield from serve_standard_app(mcp=False)``.
    """
    lab = Lab()
    host = build_host(lab)
    with serve(create_app(host, **options)) as url:
        yield Live(url=url, host=host, lab=lab)
