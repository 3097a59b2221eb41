"""What ``Host.invoke`` adds on top of ``Registry.dispatch`` for the same tool."""

from __future__ import annotations

import itertools
import uuid

from bench import Case, Sides
from bench._echo import echo_tool
from bench._notes import WRITE_RISK
from bench.bench_ledger import each_completes
from charter import Principal, Registry, ToolContext
from charter.audit import MemoryAuditSink
from charter.host import Host

_ARGUMENTS = {"text": "hello", "limit": 3}
_PRINCIPAL = Principal(
    subject="user-1", tenant_id="tenant-a", scopes=frozenset({"notes:read", "notes:write"})
)


def _registry() -> Registry:
    registry = Registry()
    registry.register(echo_tool())
    registry.register(
        echo_tool(
            "save_note",
            "Save a note (pretend).",
            tier="write",
            risk_policy=WRITE_RISK,
            required_scopes=["notes:write"],
        )
    )
    return registry


def cases() -> list[Case]:
    """The host's read path and its ledgered write path, each against ``dispatch``."""
    registry = _registry()
    host = Host(registry, audit=MemoryAuditSink())

    async def invoke_read() -> object:
        return await host.invoke("echo", _ARGUMENTS, _PRINCIPAL)

    async def dispatch_read() -> object:
        # What a transport calling the registry directly would do: build a context, dispatch.
        ctx = ToolContext(tenant_id=_PRINCIPAL.tenant_id, principal=_PRINCIPAL)
        return await registry.dispatch("echo", _ARGUMENTS, ctx)

    # Fresh request ids, made outside the timed calls' own work as a client would.
    request_ids = (str(uuid.uuid4()) for _ in itertools.count())

    async def invoke_write() -> object:
        arguments = {**_ARGUMENTS, "_charter": {"requestId": next(request_ids)}}
        return await host.invoke("save_note", arguments, _PRINCIPAL)

    async def dispatch_write() -> object:
        ctx = ToolContext(tenant_id=_PRINCIPAL.tenant_id, principal=_PRINCIPAL)
        return await registry.dispatch("save_note", _ARGUMENTS, ctx)

    async def check() -> None:
        await each_completes(invoke_read, dispatch_read, invoke_write, dispatch_write)
        audited = await host.audit.events(limit=2)
        if [e.tool for e in audited] != ["save_note", "echo"]:
            raise AssertionError("the host did not audit the calls")

    return [
        Sides(invoke_read, dispatch_read, check).case(
            "Host.invoke: async read tool",
            "Registry.dispatch",
            target=3.0,
            note=(
                "a trivial async read tool requiring one scope, called by a principal holding "
                "it, through the whole pipeline (payload limits, lookup, auth mode, scopes, "
                "tenancy, controls, validation, handler, output validation, one audit event "
                "in a MemoryAuditSink, the telemetry hooks with no OpenTelemetry provider "
                "installed) against `Registry.dispatch` of the same tool with a fresh "
                "`ToolContext`. Trimming the host's per-call bookkeeping (2026-12-06: no "
                "WeakSet frames, the C JSON parser before the duplicate-key hook, a "
                "template-filled audit event, the context and `CallOptions` built in one "
                "call each, fewer coroutine frames) took `Host.invoke` from 271,000 to 223,000 "
                "instructions a call under callgrind and the ratio from 2.6x to 2.3x side by "
                "side. Profiled, no step dominates: the audit event (a pydantic model and its "
                "record, about a seventh of the call), validating input and output, payload "
                "limits, scopes and tenancy, the tool context and the remaining coroutine "
                "frames each take a slice. Over a real transport this is a few percent of a "
                "round trip (the MCP over streamable HTTP cases)."
            ),
        ),
        Sides(invoke_write, dispatch_write, check).case(
            "Host.invoke: ledgered write tool (MemoryStore)",
            "Registry.dispatch",
            target=6.0,
            note=(
                "the same handler as a write tool with a fresh requestId per call: the host "
                "also fingerprints the command and runs it in a ledger transaction of the "
                "in-memory store (claim, handler, stored outcome, audit event), against "
                "`Registry.dispatch`, which does none of that. Why the 6x target is missed: "
                "the baseline is a 9 µs function call and the ledger is work it does not do "
                "at all; of charter's ~100 µs, the RFC 8785 canonical fingerprint of the "
                "command is about a quarter (pure Python: the core depends on nothing but "
                "pydantic), the ledger entry model, the stored outcome's JSON and "
                "the read pipeline most of the rest. What users pay for a ledger is the "
                "durable case, `Ledgered write (SQLite|PostgreSQL)`, which meets its 1.5x."
            ),
        ),
    ]
