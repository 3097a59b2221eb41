"""Reliability battery through the transports (reliability.md §5.4-5.8): the travel example
served as ``charter serve`` serves it — REST and MCP streamable HTTP from one app under
uvicorn on 127.0.0.1, MCP stdio from ``charter serve --stdio`` subprocesses — on a real
``SqlStore`` with the demo API keys.

Rows proven through ``Host.invoke`` (S01-S04, T01-T04, I01-I07, O01-O02 in ``tests/host``)
and the transports' own specifics (``tests/http``, ``tests/mcp``) are not repeated; these
tests add what only a wire shows: that the three transports agree (X01, X03), that bad
keys never reach the pipeline (S05), and what a hostile caller sees (T05, T06, I08, O03-O05).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import mcp.types as types
import pytest
from _transports import (
    ADMIN,
    AGENT,
    APPROVER,
    GLOBEX,
    INITIALIZE_PARAMS,
    Caller,
    Databases,
    HttpCaller,
    RawHttp,
    RawMcp,
    Seen,
    SharedStdio,
    TravelSite,
    effect_labels,
    ledger_state,
    mcp_http_caller,
    mcp_stdio_caller,
    parse_mcp_response,
    prepare_travel,
    relabel,
    scalar,
    travel_site,
    unlabelled_ids,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator
from pydantic import BaseModel
from tests.builders import controls
from tests.builders import request_id as rid

from charter import Tool, ToolContext, tool
from charter.http._payloads import AcceptedBody, CallResultBody, ProblemBody
from charter.mcp import OUTCOME_META_KEY
from charter.outcome import outcome_adapter
from charter.store import SqlStore

pytestmark = pytest.mark.anyio

LEDGER_ROWS = "SELECT count(*) FROM charter_ledger_entries WHERE request_id = :r"
AUDIT_ROWS = "SELECT count(*) FROM charter_audit_events WHERE request_id = :r"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Databases]:
    """Fresh databases on SQLite, and on PostgreSQL when it answers (CI=true: must)."""
    dbs = Databases(str(request.param), tmp_path)
    try:
        yield dbs
    finally:
        dbs.close()


@dataclass(frozen=True)
class Travel:
    """A new database holding the travel demo's tables, data and API keys."""

    url: str
    keys: dict[str, str]
    """Each role's API key."""


@pytest.fixture
async def travel(databases: Databases, tmp_path: Path) -> Travel:
    """The travel demo on a new database of the test's backend."""
    url = databases.new()
    return Travel(url, await prepare_travel(url, tmp_path / "keys.json"))


# -- X01 --------------------------------------------------------------------------------------


@dataclass
class Scenario:
    """The X01 script's request ids, each with the label it has in every transport's run."""

    ids: dict[str, str]

    @classmethod
    def fresh(cls) -> Scenario:
        return cls(ids={label: rid() for label in ("R1", "R2", "R3", "R4", "R5", "R6")})

    def labels(self) -> dict[str, str]:
        return {value: label for label, value in self.ids.items()}


async def run_x01(caller: Caller, scenario: Scenario) -> tuple[list[tuple[str, Seen]], str]:
    """L03, L05, A04, S01 and T01 as one script; returns what each step saw."""
    r = scenario.ids
    steps: list[tuple[str, Seen]] = []

    async def step(label: str, role: str, tool: str, arguments: dict[str, Any]) -> Seen:
        seen = await caller.call(role, tool, arguments)
        steps.append((label, seen))
        return seen

    rename = {"trip_id": "trp_lisbon01", "name": "Lisbon summit"}
    # L03: a call, then its exact replay.
    await step("L03 first", AGENT, "trips.rename", {**rename, **controls(r["R1"])})
    await step("L03 replay", AGENT, "trips.rename", {**rename, **controls(r["R1"])})
    # L05: the same request id with another argument, and for another tool.
    other = {**rename, "name": "Renamed again"}
    await step("L05 other arguments", AGENT, "trips.rename", {**other, **controls(r["R1"])})
    await step("L05 other tool", AGENT, "trips.rename.v2", {**rename, **controls(r["R1"])})
    # A04: an approval for 1000 cents used for 1001, for another booking, then as granted.
    refund = {"booking_id": "bkg_hotel001", "amount_cents": 1000}
    asked = await step(
        "A04 ask", AGENT, "bookings.refund", {**refund, **controls(r["R2"], confirmed=True)}
    )
    approval = asked.approval_id or ""
    # A decision authorises another call: unconfirmed, the approver's tool only asks.
    decision = {"approval_id": approval}
    await step("A04 grant unconfirmed", APPROVER, "approve_action_approval", decision)
    confirmed = {"_charter": {"confirmed": True}}
    await step("A04 grant", APPROVER, "approve_action_approval", {**decision, **confirmed})
    bound = {"confirmed": True, "approvalId": approval}
    more = {**refund, "amount_cents": 1001}
    await step(
        "A04 changed amount", AGENT, "bookings.refund", {**more, **controls(r["R2"], **bound)}
    )
    await step("A04 new id", AGENT, "bookings.refund", {**more, **controls(r["R3"], **bound)})
    elsewhere = {**refund, "booking_id": "bkg_flight01"}
    await step(
        "A04 other target", AGENT, "bookings.refund", {**elsewhere, **controls(r["R2"], **bound)}
    )
    await step("A04 as granted", AGENT, "bookings.refund", {**refund, **controls(r["R2"], **bound)})
    await step("A04 replay", AGENT, "bookings.refund", {**refund, **controls(r["R2"], **bound)})
    # S01: scopes the caller lacks, named; the admin tool without the admin scope.
    await step(
        "S01 missing refund scope",
        GLOBEX,
        "bookings.refund",
        {"booking_id": "bkg_train001", "amount_cents": 5, **controls(rid(), confirmed=True)},
    )
    await step("S01 missing write scope", APPROVER, "trips.rename", {**rename, **controls(rid())})
    await step("S01 admin tool", AGENT, "admin.tenants.list", {})
    # T01: another tenant for a tool that is not delegable, even as admin; a delegable
    # one without the admin scope; then the corrected call with the same request id.
    await step(
        "T01 other tenant",
        AGENT,
        "trips.rename",
        {**rename, **controls(r["R4"], onBehalfOf="globex")},
    )
    await step(
        "T01 admin pinned",
        ADMIN,
        "trips.rename",
        {"trip_id": "trp_oslo0001", "name": "Mine now", **controls(r["R5"], onBehalfOf="globex")},
    )
    await step(
        "T01 delegable without admin",
        AGENT,
        "memory.update",
        {"tenant_id": "globex", "key": "k", "value": "v", **controls(r["R6"])},
    )
    await step(
        "T01 corrected", AGENT, "trips.rename", {**rename, "name": "Fixed", **controls(r["R4"])}
    )
    return steps, approval


X01_EXPECTED: list[tuple[str, str, str | None, str | None, bool]] = [
    ("L03 first", "completed", None, None, False),
    ("L03 replay", "completed", None, None, True),
    ("L05 other arguments", "failed", "IDEMPOTENCY_CONFLICT", "idempotency_key_reused", False),
    ("L05 other tool", "failed", "IDEMPOTENCY_CONFLICT", "idempotency_key_reused", False),
    ("A04 ask", "interaction-required", "APPROVAL_REQUIRED", None, False),
    ("A04 grant unconfirmed", "interaction-required", "CONFIRMATION_REQUIRED", None, False),
    ("A04 grant", "completed", None, None, False),
    ("A04 changed amount", "failed", "AUTHORIZATION_DENIED", "fingerprint_mismatch", False),
    ("A04 new id", "failed", "AUTHORIZATION_DENIED", "fingerprint_mismatch", False),
    ("A04 other target", "failed", "AUTHORIZATION_DENIED", "mismatched_action", False),
    ("A04 as granted", "completed", None, None, False),
    ("A04 replay", "completed", None, None, True),
    ("S01 missing refund scope", "failed", "AUTHORIZATION_DENIED", "insufficient_scope", False),
    ("S01 missing write scope", "failed", "AUTHORIZATION_DENIED", "insufficient_scope", False),
    ("S01 admin tool", "failed", "AUTHORIZATION_DENIED", "admin_required", False),
    ("T01 other tenant", "failed", "AUTHORIZATION_DENIED", "tenant_forbidden", False),
    ("T01 admin pinned", "failed", "AUTHORIZATION_DENIED", "tenant_forbidden", False),
    ("T01 delegable without admin", "failed", "AUTHORIZATION_DENIED", "tenant_forbidden", False),
    ("T01 corrected", "completed", None, None, False),
]
"""Each X01 step's kind, code, reason and replay marker: the same on every transport."""


@dataclass
class Served:
    """One transport's run of the scenario on its own database."""

    db_url: str
    steps: list[tuple[str, Seen]]
    labels: dict[str, str]


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_X01_transport_parity(databases: Databases, tmp_path: Path) -> None:
    runs: dict[str, Served] = {}
    for transport in ("http", "mcp-http", "mcp-stdio"):
        url = databases.new(transport)
        keys_file = tmp_path / f"{transport}-keys.json"
        keys = await prepare_travel(url, keys_file)
        scenario = Scenario.fresh()
        if transport == "mcp-stdio":
            async with mcp_stdio_caller(url, keys, keys_file) as stdio:
                steps, approval = await run_x01(stdio, scenario)
        else:
            with travel_site(url, keys) as site:
                if transport == "http":
                    http = HttpCaller(site)
                    try:
                        steps, approval = await run_x01(http, scenario)
                    finally:
                        await http.aclose()
                else:
                    async with mcp_http_caller(site) as mcp:
                        steps, approval = await run_x01(mcp, scenario)
        labels = {**scenario.labels(), approval: "A1"}
        labels.update(await effect_labels(url, labels))
        runs[transport] = Served(db_url=url, steps=steps, labels=labels)

    for transport, served in runs.items():
        got = [(label, s.kind, s.code, s.reason, s.replayed) for label, s in served.steps]
        assert got == X01_EXPECTED, transport
    # The same outputs (ids relabelled), replays equal to their first answer.
    outputs = {
        transport: [(label, s.labelled(served.labels).output) for label, s in served.steps]
        for transport, served in runs.items()
    }
    assert outputs["mcp-http"] == outputs["http"]
    assert outputs["mcp-stdio"] == outputs["http"]
    # The same ledger, approvals, claims, audit trail and travel tables.
    states = {t: await ledger_state(s.db_url, s.labels) for t, s in runs.items()}
    assert unlabelled_ids(states["http"]) == []
    assert states["http"]["ledger"], "the scenario left no ledger rows"
    for transport in ("mcp-http", "mcp-stdio"):
        for table, rows in states["http"].items():
            assert states[transport][table] == rows, (transport, table)


# -- X03 --------------------------------------------------------------------------------------


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.fixture(scope="module")
def shared_stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedStdio]:
    """The module's stdio servers, one per backend (``SharedStdio``)."""
    shared = SharedStdio(tmp_path_factory.mktemp("stdio"))
    try:
        yield shared
    finally:
        shared.close()


@asynccontextmanager
async def raw_connection(
    transport: str, databases: Databases, shared_stdio: SharedStdio, keys_file: Path
) -> AsyncIterator[tuple[str, RawMcp]]:
    """A raw MCP connection as the agent, and the URL of its server's database: over HTTP
    a new travel site on a new database; over stdio the module's server on the backend."""
    if transport == "mcp-stdio":
        agent = await shared_stdio.agent(databases.backend)
        yield agent.db_url, agent.raw
        return
    url = databases.new()
    keys = await prepare_travel(url, keys_file)
    with travel_site(url, keys) as site:
        async with RawHttp.open(site.mcp_url, keys[AGENT]) as http:
            yield url, http


@pytest.mark.parametrize("transport", ["mcp-http", "mcp-stdio"])
async def test_X03_a_retry_with_a_new_jsonrpc_id_is_a_replay(
    databases: Databases, shared_stdio: SharedStdio, tmp_path: Path, transport: str
) -> None:
    request_id = rid()
    arguments = {"name": "Porto", "destination": "Porto", "nights": 2, **controls(request_id)}
    connection = raw_connection(transport, databases, shared_stdio, tmp_path / "keys.json")
    async with connection as (url, mcp):
        first = await mcp.request(101, "tools/call", tool_call("trips.create", arguments))
        retry = await mcp.request(202, "tools/call", tool_call("trips.create", arguments))
    assert (first["id"], retry["id"]) == (101, 202)
    assert first["result"]["isError"] is False and retry["result"]["isError"] is False
    assert retry["result"]["structuredContent"] == first["result"]["structuredContent"]
    assert "charter/replayed" not in (first["result"].get("_meta") or {})
    assert retry["result"]["_meta"]["charter/replayed"] is True
    # One trip, one ledger row; the audit trail shows the run and the replay.
    assert await scalar(url, "SELECT count(*) FROM travel_trips WHERE name = 'Porto'") == 1
    assert await scalar(url, LEDGER_ROWS, r=request_id) == 1
    assert await scalar(url, AUDIT_ROWS, r=request_id) == 2


async def test_X03_a_retry_after_the_first_answer_was_lost_runs_once(travel: Travel) -> None:
    # The stream breaks before the answer arrives; the client retries with a new JSON-RPC
    # id. Whether the first call finished or was cut off, the action happens once.
    url, keys = travel.url, travel.keys
    request_id = rid()
    arguments = {"name": "Faro", "destination": "Faro", "nights": 3, **controls(request_id)}
    with travel_site(url, keys) as site:
        async with RawHttp.open(site.mcp_url, keys[AGENT]) as mcp:
            message = mcp.message(303, "tools/call", tool_call("trips.create", arguments))
            async with httpx.AsyncClient(timeout=60) as lossy:
                async with lossy.stream("POST", mcp.url, json=message, headers=mcp.headers):
                    pass  # the connection closes without reading the answer
            for attempt in range(404, 504):
                retry = await mcp.request(
                    attempt, "tools/call", tool_call("trips.create", arguments)
                )
                outcome = (retry["result"].get("_meta") or {}).get("charter/outcome") or {}
                if outcome.get("code") != "REQUEST_IN_PROGRESS":
                    break
                await asyncio.sleep(0.1)  # a retry loop's pause, not a wait for an event
    assert retry["result"]["isError"] is False, retry
    assert await scalar(url, "SELECT count(*) FROM travel_trips WHERE name = 'Faro'") == 1
    assert await scalar(url, LEDGER_ROWS, r=request_id) == 1


# -- S05 / S06 ----------------------------------------------------------------------------------


class Nothing(BaseModel):
    pass


class Who(BaseModel):
    subject: str
    api_key_id: str | None


def whoami_probe(contexts: list[str]) -> Tool[Any, Any, Any]:
    """A read tool that keeps what its handler saw of the call (the context's repr)."""

    @tool(tier="read", name="battery.whoami", required_scopes=["trips:read"])
    async def whoami(args: Nothing, ctx: ToolContext) -> Who:
        """Say who is calling."""
        contexts.append(repr(ctx))
        assert ctx.principal is not None
        return Who(subject=ctx.principal.subject, api_key_id=ctx.principal.api_key_id)

    return whoami


@dataclass
class BadKeys:
    """Credentials that must never authenticate, by kind."""

    keys: dict[str, str]

    @classmethod
    async def make(cls, url: str, valid: str) -> BadKeys:
        key_id, _, secret = valid.removeprefix("chk_").partition("_")
        async with SqlStore(url) as store:
            revoked, record = await store.create_api_key(
                tenant_id="acme", subject="agent-ada", scopes=["trips:write"], kind="agent"
            )
            assert await store.revoke_api_key(record.id)
            expired, _ = await store.create_api_key(
                tenant_id="acme",
                subject="agent-ada",
                scopes=["trips:write"],
                kind="agent",
                expires_at=datetime.now(UTC) - timedelta(minutes=1),
            )
        return cls(
            keys={
                "unknown": f"chk_{uuid.uuid4().hex[:12]}_{secret}",
                "wrong secret": f"chk_{key_id}_{'0' * len(secret)}",
                "malformed": "not-a-charter-key",
                "truncated": valid[:-4],
                "oversized": valid + "x" * 10_000,
                "revoked": revoked,
                "expired": expired,
            }
        )


async def test_S05_bad_keys_are_401_over_rest_before_anything_runs(travel: Travel) -> None:
    url, keys = travel.url, travel.keys
    bad = await BadKeys.make(url, keys[AGENT])
    contexts: list[str] = []
    rename = {"trip_id": "trp_kyoto001", "name": "Hijacked"}
    with travel_site(url, keys, extra_tools=[whoami_probe(contexts)]) as site:
        async with httpx.AsyncClient(base_url=site.url, timeout=60) as http:
            answers: dict[str, httpx.Response] = {}
            request_ids = []
            for kind, key in bad.keys.items():
                request_ids.append(rid())
                for header in ({"Authorization": f"Bearer {key}"}, {"X-API-Key": key}):
                    answers[f"{kind} {next(iter(header))}"] = await http.post(
                        "/v1/tools/trips.rename:call",
                        json={**rename, **controls(request_ids[-1])},
                        headers=header,
                    )
            # A key in the query string is no credential at all (never read from a URL).
            in_query = await http.post(
                "/v1/tools/trips.rename:call",
                params={"api_key": keys[AGENT], "access_token": keys[AGENT]},
                json={**rename, **controls(rid())},
            )
            missing = await http.post(
                "/v1/tools/trips.rename:call", json={**rename, **controls(rid())}
            )
            me = await http.post(
                "/v1/tools/battery.whoami:call",
                json={},
                headers={"Authorization": f"Bearer {keys[AGENT]}"},
            )
    bodies = {
        name: (r.status_code, r.headers["www-authenticate"], r.text) for name, r in answers.items()
    }
    # Unknown, malformed, wrong, revoked and expired keys answer exactly alike: no oracle.
    assert len(set(bodies.values())) == 1, bodies
    status, challenge, text = next(iter(bodies.values()))
    assert status == 401 and challenge == 'Bearer error="invalid_token"'
    assert json.loads(text)["reason"] == "invalid_token"
    for anonymous in (in_query, missing):
        assert anonymous.status_code == 401
        assert anonymous.json()["code"] == "UNAUTHENTICATED"
    # Nothing ran: no trip renamed, no ledger row, and the rejected keys never reached
    # the pipeline (no audit event for their request ids).
    name = "SELECT name FROM travel_trips WHERE id = 'trp_kyoto001'"
    assert await scalar(url, name) == "Kyoto research trip"
    assert await scalar(url, "SELECT count(*) FROM charter_ledger_entries") == 0
    for request_id in request_ids:
        assert await scalar(url, AUDIT_ROWS, r=request_id) == 0
    # The handler sees the principal (and the key's public id), never the key itself.
    assert me.status_code == 200
    assert me.json()["output"]["subject"] == "agent-ada"
    secret = keys[AGENT].split("_", 2)[2]  # chk_<id>_<secret>; the secret may hold "_"
    assert len(contexts) == 1 and "agent-ada" in contexts[0]
    assert keys[AGENT] not in contexts[0] and secret not in contexts[0]


async def test_S05_bad_keys_are_401_over_mcp_before_a_session_starts(travel: Travel) -> None:
    url, keys = travel.url, travel.keys
    bad = await BadKeys.make(url, keys[AGENT])
    contexts: list[str] = []
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS}
    accept = {"Accept": "application/json, text/event-stream"}
    with travel_site(url, keys, extra_tools=[whoami_probe(contexts)]) as site:
        async with httpx.AsyncClient(timeout=60) as http:
            answers = {
                kind: await http.post(
                    site.mcp_url,
                    json=initialize,
                    headers={**accept, "Authorization": f"Bearer {key}"},
                )
                for kind, key in bad.keys.items()
            }
            missing = await http.post(site.mcp_url, json=initialize, headers=accept)
        async with mcp_http_caller(site) as mcp:
            me = await mcp.call(AGENT, "battery.whoami", {})
    bodies = {kind: (r.status_code, r.text) for kind, r in answers.items()}
    assert len(set(bodies.values())) == 1, bodies
    assert next(iter(bodies.values()))[0] == 401
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert "mcp-session-id" not in missing.headers
    assert all("mcp-session-id" not in r.headers for r in answers.values())
    assert me.kind == "completed" and me.output["subject"] == "agent-ada"
    secret = keys[AGENT].split("_", 2)[2]  # chk_<id>_<secret>; the secret may hold "_"
    assert len(contexts) == 1 and keys[AGENT] not in contexts[0] and secret not in contexts[0]


@pytest.mark.parametrize("transport", ["http", "mcp-http"])
async def test_S06_a_replay_after_the_scope_was_revoked_is_denied(
    travel: Travel, transport: str
) -> None:
    # Documented policy (docs/reliability.md): authentication, scopes and tenancy are
    # checked before the ledger is looked up, so a stored outcome is only ever replayed
    # to a caller who may make the call now.
    url, keys = travel.url, travel.keys
    request_id = rid()
    arguments = {"trip_id": "trp_lisbon01", "name": "Before the revocation", **controls(request_id)}
    with travel_site(url, keys) as site:
        async with caller_for(transport, site) as call:
            first = await call(AGENT, "trips.rename", arguments)
            async with SqlStore(url) as store:
                # The agent's key is revoked; it gets a new one that may only read.
                agent_key_id = keys[AGENT].removeprefix("chk_").partition("_")[0]
                assert await store.revoke_api_key(agent_key_id)
                site.keys["read-only"], _ = await store.create_api_key(
                    tenant_id="acme", subject="agent-ada", scopes=["trips:read"], kind="agent"
                )
                site.keys["write-again"], _ = await store.create_api_key(
                    tenant_id="acme", subject="agent-ada", scopes=["trips:write"], kind="agent"
                )
            replay = await call("read-only", "trips.rename", arguments)
            restored = await call("write-again", "trips.rename", arguments)
    assert first.kind == "completed" and not first.replayed
    assert (replay.kind, replay.code, replay.reason) == (
        "failed",
        "AUTHORIZATION_DENIED",
        "insufficient_scope",
    )
    assert not replay.replayed
    # The stored outcome was untouched: with the scope back, the replay is served.
    assert restored.kind == "completed" and restored.replayed
    assert restored.output == first.output


CallFn = Callable[[str, str, dict[str, Any]], Awaitable[Seen]]


@asynccontextmanager
async def caller_for(transport: str, site: TravelSite) -> AsyncIterator[CallFn]:
    """``call(role, tool, arguments)`` over REST or MCP streamable HTTP."""
    if transport == "http":
        http = HttpCaller(site)
        try:
            yield http.call
        finally:
            await http.aclose()
        return
    async with mcp_http_caller(site) as mcp:
        yield mcp.call


# -- T05 / T06 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["http", "mcp-http"])
async def test_T05_another_tenants_object_answers_like_a_missing_one(
    travel: Travel, transport: str
) -> None:
    url, keys = travel.url, travel.keys
    with travel_site(url, keys) as site:
        answers = await raw_answers(
            transport,
            site,
            keys[AGENT],
            [
                ("trips.get", {"trip_id": "trp_oslo0001"}),  # globex's trip
                ("trips.get", {"trip_id": "trp_nowhere01"}),  # no such trip
                ("trips.rename", {"trip_id": "trp_oslo0001", "name": "x", **controls(rid())}),
                ("trips.rename", {"trip_id": "trp_nowhere01", "name": "x", **controls(rid())}),
            ],
        )
    foreign_get, missing_get, foreign_rename, missing_rename = answers
    assert "NOT_FOUND" in foreign_get
    assert foreign_get.replace("trp_oslo0001", "X") == missing_get.replace("trp_nowhere01", "X")
    assert foreign_rename.replace("trp_oslo0001", "X") == missing_rename.replace(
        "trp_nowhere01", "X"
    )
    assert await scalar(url, "SELECT name FROM travel_trips WHERE id = 'trp_oslo0001'") == (
        "Oslo sales visit"
    )


async def raw_answers(
    transport: str, site: TravelSite, key: str, calls: list[tuple[str, dict[str, Any]]]
) -> list[str]:
    """What the caller received for each call, as text (status and body, or the result)."""
    answers: list[str] = []
    if transport == "http":
        async with httpx.AsyncClient(base_url=site.url, timeout=60) as http:
            for name, arguments in calls:
                response = await http.post(
                    f"/v1/tools/{name}:call",
                    json=arguments,
                    headers={"Authorization": f"Bearer {key}"},
                )
                answers.append(f"{response.status_code} {response.text}")
        return answers
    async with RawHttp.open(site.mcp_url, key) as mcp:
        for index, (name, arguments) in enumerate(calls):
            message = await mcp.request(100, "tools/call", tool_call(name, arguments))
            assert message["id"] == 100, index
            answers.append(json.dumps(message, sort_keys=True))
    return answers


async def test_T06_another_tenants_request_and_approval_ids_are_not_found(travel: Travel) -> None:
    url, keys = travel.url, travel.keys
    async with SqlStore(url) as store:
        keys["globex-approver"], _ = await store.create_api_key(
            tenant_id="globex", subject="gus", scopes=["charter:approve", "trips:read"]
        )
    request_id, pending_id = rid(), rid()
    with travel_site(url, keys) as site:
        async with httpx.AsyncClient(base_url=site.url, timeout=60) as http:

            def as_(role: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {keys[role]}"}

            done = await http.post(
                "/v1/tools/trips.rename:call",
                json={"trip_id": "trp_lisbon01", "name": "Mine", **controls(request_id)},
                headers=as_(AGENT),
            )
            asked = await http.post(
                "/v1/tools/bookings.refund:call",
                json={
                    "booking_id": "bkg_hotel001",
                    "amount_cents": 100,
                    **controls(pending_id, confirmed=True),
                },
                headers=as_(AGENT),
            )
            approval_id = asked.json()["approvalId"]
            unknown_request, unknown_approval = rid(), "apr_" + uuid.uuid4().hex
            pairs = {
                "action status": (f"/v1/actions/{request_id}", f"/v1/actions/{unknown_request}"),
                "awaiting approval": (
                    f"/v1/actions/{pending_id}",
                    f"/v1/actions/{unknown_request}",
                ),
                "approval": (f"/v1/approvals/{approval_id}", f"/v1/approvals/{unknown_approval}"),
            }
            looked: dict[str, tuple[httpx.Response, httpx.Response]] = {}
            for what, (real, unknown) in pairs.items():
                looked[what] = (
                    await http.get(real, headers=as_("globex-approver")),
                    await http.get(unknown, headers=as_("globex-approver")),
                )
            decided = {
                verb: (
                    await http.post(
                        f"/v1/approvals/{approval_id}:{verb}", headers=as_("globex-approver")
                    ),
                    await http.post(
                        f"/v1/approvals/{unknown_approval}:{verb}", headers=as_("globex-approver")
                    ),
                )
                for verb in ("grant", "deny")
            }
            listed = await http.get("/v1/approvals", headers=as_("globex-approver"))
            own = await http.get(f"/v1/actions/{request_id}", headers=as_(AGENT))
    assert done.status_code == 200 and asked.status_code == 202 and own.status_code == 200
    ids = {
        request_id: "ID",
        pending_id: "ID",
        unknown_request: "ID",
        approval_id: "ID",
        unknown_approval: "ID",
    }
    for what, (theirs, nobodys) in {**looked, **decided}.items():
        assert theirs.status_code == nobodys.status_code == 404, what
        assert theirs.json()["code"] == "NOT_FOUND", what
        assert relabel(theirs.text, ids) == relabel(nobodys.text, ids), what
    assert listed.json()["approvals"] == []
    # The refused decisions changed nothing: the approval still waits for acme.
    status = "SELECT status FROM charter_approvals WHERE id = :a"
    assert await scalar(url, status, a=approval_id) == "pending"


# -- I08 --------------------------------------------------------------------------------------

FUZZ_EXAMPLES = 8
"""Examples per tool, mode and transport: bounded, so the suite stays in its budget."""

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def schema_strategy(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Instances of a tool's input schema: hypothesis-jsonschema for each value, objects
    assembled here (its own object strategy fails on this Hypothesis version)."""
    if "$ref" in schema:
        return schema_strategy(defs[schema["$ref"].rpartition("/")[2]], defs)
    if "anyOf" in schema:
        return st.one_of([schema_strategy(branch, defs) for branch in schema["anyOf"]])
    if schema.get("type") != "object":
        return from_schema(schema)
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fixed = st.fixed_dictionaries(
        {k: schema_strategy(v, defs) for k, v in properties.items() if k in required},
        optional={k: schema_strategy(v, defs) for k, v in properties.items() if k not in required},
    )
    if properties or schema.get("additionalProperties") is False:
        return fixed
    return st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3)


class ErrorLog(logging.Handler):
    """Keeps the ERROR records of charter and uvicorn (an unhandled exception logs one)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(("charter", "uvicorn", "mcp")):
            self.messages.append(f"{record.name}: {record.getMessage()}")


@contextmanager
def error_log() -> Iterator[ErrorLog]:
    handler = ErrorLog()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


class SyncMcp:
    """MCP streamable HTTP for a synchronous test: initialize once, then tools/call."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=60)
        self.headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {key}",
        }
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE_PARAMS}
        response = self.http.post(url, json=init, headers=self.headers)
        assert response.status_code == 200, response.text
        self.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = str(INITIALIZE_PARAMS["protocolVersion"])
        notified = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert self.http.post(url, json=notified, headers=self.headers).status_code == 202
        self._id = 0

    def post(self, message: object) -> httpx.Response:
        return self.http.post(self.url, json=message, headers=self.headers)

    def call(self, name: str, arguments: object) -> tuple[int, dict[str, Any]]:
        self._id += 1
        response = self.post(
            {
                "jsonrpc": "2.0",
                "id": self._id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )
        if response.status_code != 200:
            return response.status_code, {}
        return 200, parse_mcp_response(response.text, response.headers.get("content-type", ""))


def role_for(entry: dict[str, Any]) -> str:
    """The demo principal that may call a tool: the approver, the admin, or the agent."""
    if entry["auth"] == "admin":
        return ADMIN
    if "charter:approve" in entry["requiredScopes"]:
        return APPROVER
    return AGENT


def with_controls(entry: dict[str, Any], arguments: Any, request_id: str) -> Any:
    """The arguments plus the controls the tool takes, so valid calls reach the handler."""
    if not isinstance(arguments, dict):
        return arguments
    accepted = {*entry["controls"]["required"], *entry["controls"]["optional"]}
    block: dict[str, Any] = {}
    if "requestId" in accepted:
        block["requestId"] = request_id
    if "confirmed" in accepted:
        block["confirmed"] = True
    return {**arguments, "_charter": block} if block else arguments


def check_http_answer(entry: dict[str, Any], response: httpx.Response) -> None:
    assert response.status_code < 500, (entry["name"], response.status_code, response.text)
    body = response.json()
    if response.status_code == 200:
        CallResultBody.model_validate(body)
        Draft202012Validator(entry["outputSchema"]).validate(body["output"])
    elif response.status_code == 202:
        AcceptedBody.model_validate(body)
    else:
        assert response.headers["content-type"] == "application/problem+json"
        ProblemBody.model_validate(body)


def check_mcp_answer(entry: dict[str, Any], status: int, message: dict[str, Any]) -> None:
    assert status == 200, (entry["name"], status)
    if "error" in message:  # a protocol fault: a JSON-RPC error object, never an exception
        assert set(message["error"]) >= {"code", "message"}, message
        return
    result = types.CallToolResult.model_validate(message["result"])
    if result.is_error:
        outcome_adapter.validate_python(result.meta[OUTCOME_META_KEY] if result.meta else None)
        first = result.content[0]
        assert isinstance(first, types.TextContent) and first.text.startswith("["), first
    else:
        Draft202012Validator(entry["outputSchema"]).validate(result.structured_content)


def fuzz(
    strategy: st.SearchStrategy[Any], entry: dict[str, Any], rest: httpx.Client, mcp: SyncMcp
) -> int:
    """Send ``FUZZ_EXAMPLES`` drawn arguments over REST and MCP; return how many."""
    sent: list[object] = []

    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(arguments=strategy)
    def exchange(arguments: Any) -> None:
        call = with_controls(entry, arguments, rid())
        sent.append(call)
        check_http_answer(entry, rest.post(f"/v1/tools/{entry['name']}:call", json=call))
        check_mcp_answer(entry, *mcp.call(entry["name"], call))

    exchange()
    return len(sent)


def test_I08_fuzzed_arguments_from_each_schema_never_break_either_transport(
    tmp_path: Path,
) -> None:
    # SQLite, the example's own database. (On PostgreSQL a text column refuses NUL; the
    # travel tools pass strings through, see docs/reliability.md.)
    dbs = Databases("sqlite", tmp_path)
    url = dbs.new()
    keys = asyncio.run(prepare_travel(url, tmp_path / "keys.json"))
    calls = 0
    with travel_site(url, keys) as site, error_log() as errors, ExitStack() as stack:
        rest = {
            role: stack.enter_context(
                httpx.Client(
                    base_url=site.url,
                    timeout=60,
                    headers={"Authorization": f"Bearer {keys[role]}"},
                )
            )
            for role in (AGENT, APPROVER, ADMIN)
        }
        mcp = {role: SyncMcp(site.mcp_url, keys[role]) for role in (AGENT, APPROVER, ADMIN)}
        for session in mcp.values():
            stack.callback(session.http.close)
        # The admin sees every travel tool, the approver the approval tools.
        entries = {
            e["name"]: e
            for role in (ADMIN, APPROVER)
            for e in rest[role].get("/v1/tools").json()["tools"]
        }
        assert len(entries) >= 16, sorted(entries)
        for entry in entries.values():
            schema = {k: v for k, v in entry["inputSchema"].items() if k != "$schema"}
            role = role_for(entry)
            valid = schema_strategy(schema, schema.get("$defs", {}))
            anything = st.dictionaries(st.text(max_size=12), JSON_VALUES, max_size=5)
            for strategy in (valid, anything):
                calls += fuzz(strategy, entry, rest[role], mcp[role])
        # Protocol-level garbage on the MCP endpoint: JSON-RPC errors, never a 5xx.
        garbage: list[dict[str, Any]] = [
            {"arguments": {}},
            {"name": 7},
            {"name": "trips.get", "arguments": [1]},
            {"name": "trips.get", "arguments": "text"},
        ]
        for params in garbage:
            message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
            response = mcp[AGENT].post(message)
            assert response.status_code < 500, (params, response.text)
        unknown = mcp[AGENT].post({"jsonrpc": "2.0", "id": 9, "method": "no/such", "params": {}})
        assert unknown.status_code < 500, unknown.text
    dbs.close()
    assert calls >= len(entries) * FUZZ_EXAMPLES
    assert errors.messages == []


# -- O03 / O04 / O05 --------------------------------------------------------------------------

MEGABYTE_FIELD = "A" * 1_000_000
"""One field of a megabyte: within the payload limits, far over the model's max_length."""


@pytest.mark.parametrize("transport", ["http", "mcp-http"])
async def test_O03_a_validation_error_on_a_megabyte_field_is_small_and_echoes_nothing(
    travel: Travel, transport: str
) -> None:
    url, keys = travel.url, travel.keys
    request_id = rid()
    with travel_site(url, keys) as site:
        [answer, too_long] = await raw_answers(
            transport,
            site,
            keys[AGENT],
            [
                (
                    "trips.create",
                    {
                        "name": MEGABYTE_FIELD,
                        "destination": "Rome",
                        "nights": 2,
                        **controls(request_id),
                    },
                ),
                # One character past the payload's string limit: refused before validation.
                ("trips.search", {"text": MEGABYTE_FIELD + "A"}),
            ],
        )
    for text in (answer, too_long):
        assert len(text) < 4096, len(text)
        assert "A" * 64 not in text
    assert "INVALID_INPUT" in answer and "name" in answer and "string_too_long" in answer
    assert "input_too_large" in too_long
    assert await scalar(url, LEDGER_ROWS, r=request_id) == 0


@pytest.mark.parametrize("transport", ["http", "mcp-http"])
async def test_O04_a_failure_is_not_stored_and_its_retry_gets_the_same_sanitised_error(
    travel: Travel, transport: str
) -> None:
    # Documented policy (docs/reliability.md, docs/ledger.md): a failed call rolls back and
    # stores nothing, so its request id stays free. Retried unchanged, it fails again with
    # the same answer, byte for byte, never marked as a replay; corrected, it runs.
    url, keys = travel.url, travel.keys
    request_id = rid()
    missing = {"trip_id": "trp_nowhere01", "name": "Ghost", **controls(request_id)}
    with travel_site(url, keys) as site:
        first, again, read, read_again = await raw_answers(
            transport,
            site,
            keys[AGENT],
            [("trips.rename", missing)] * 2 + [("trips.get", {"trip_id": "trp_nowhere01"})] * 2,
        )
        [corrected] = await raw_answers(
            transport,
            site,
            keys[AGENT],
            [("trips.rename", {**missing, "trip_id": "trp_kyoto001"})],
        )
    assert "NOT_FOUND" in first
    assert first == again and read == read_again
    if transport == "http":
        assert first.startswith("404 ") and '"replayed"' not in first
        assert corrected.startswith("200 ")
    else:
        assert '"replayed": false' in first and '"charter/replayed"' not in first
        assert '"isError": false' in corrected
    ledger = "SELECT status FROM charter_ledger_entries WHERE request_id = :r"
    assert await scalar(url, ledger, r=request_id) == "completed"


@pytest.mark.parametrize("transport", ["mcp-http", "mcp-stdio"])
async def test_O05_mcp_results_are_structured_and_valid_or_is_error_and_protocol_faults_are_jsonrpc(
    databases: Databases, shared_stdio: SharedStdio, tmp_path: Path, transport: str
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("catalog.ping", {}),
        ("trips.search", {"text": "o"}),
        ("trips.get", {"trip_id": "trp_lisbon01"}),
        ("trips.create", {"name": "Oslo", "destination": "Oslo", "nights": 1, **controls(rid())}),
        ("trips.rename", {"trip_id": "trp_kyoto001", "name": "Kyoto", **controls(rid())}),
        ("memory.update", {"key": "seat", "value": "aisle", **controls(rid())}),
        ("memory.recall", {}),
        ("trips.get", {"trip_id": "trp_nowhere01"}),  # a tool error
        ("trips.create", {"name": "", **controls(rid())}),  # invalid input
        ("no.such.tool", {}),  # unknown tool: still a result
    ]
    connection = raw_connection(transport, databases, shared_stdio, tmp_path / "keys.json")
    async with connection as (_, raw):
        listed = await raw.request(1, "tools/list", {})
        schemas = {t["name"]: t.get("outputSchema") for t in listed["result"]["tools"]}
        results = [
            await raw.request(10 + i, "tools/call", tool_call(name, arguments))
            for i, (name, arguments) in enumerate(calls)
        ]
        unknown_method = await raw.request(50, "tools/unknown", {})
        no_name = await raw.request(51, "tools/call", {"arguments": {}})
    for (name, _), message in zip(calls, results, strict=True):
        result = types.CallToolResult.model_validate(message["result"])
        if result.is_error:
            outcome = outcome_adapter.validate_python((result.meta or {})[OUTCOME_META_KEY])
            assert isinstance(result.content[0], types.TextContent)
            assert result.content[0].text.startswith(f"[{getattr(outcome, 'code', '')}")
            assert result.structured_content is None
        else:
            schema = schemas[name]
            assert schema is not None, name
            Draft202012Validator(schema).validate(result.structured_content)
            assert isinstance(result.content[0], types.TextContent)
            assert json.loads(result.content[0].text) == result.structured_content
    kinds = [bool(m["result"]["isError"]) for m in results]
    assert kinds == [False] * 7 + [True] * 3
    assert unknown_method["error"]["code"] == -32601
    assert no_name["error"]["code"] in (-32602, -32600)
