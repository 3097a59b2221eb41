"""The library internals charter._shortcuts leans on still behave as the public API does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, JsonValue, computed_field

from charter import Host, Principal, Registry, RiskPolicy, tool
from charter._shortcuts import built, computed_fields, meter_provider_reader, tracer_provider_reader
from charter.audit import AuditEvent
from charter.host._trace import _CALL_EVENT
from charter.ledger import LedgerEntry, MemoryStore
from charter.outcome import Completed, outcome_adapter


def test_a_built_completed_is_the_instance_model_construct_makes() -> None:
    output: dict[str, JsonValue] = {"trip_id": "trp_1", "nights": [1, 2]}
    fast = built(Completed, {"kind": "completed", "output": output, "replayed": False}, {"output"})
    slow = Completed.model_construct(output=output)
    assert fast == slow == Completed(output=output)
    assert fast.model_fields_set == slow.model_fields_set == {"output"}
    assert fast.model_dump() == slow.model_dump()
    assert outcome_adapter.dump_json(fast) == outcome_adapter.dump_json(slow)
    assert fast.model_copy(update={"replayed": True}).replayed is True
    with pytest.raises(Exception, match="frozen"):
        fast.replayed = True  # type: ignore[misc]  # the write the test expects refused


def test_a_built_audit_event_is_the_instance_model_construct_makes() -> None:
    # The host's own template (every field, in the model's order, at its default), filled
    # with one call's values as ``Trace.event`` does.
    values: dict[str, Any] = {
        "id": "aud_1",
        "time": datetime(2030, 1, 1, tzinfo=UTC),
        "subject": "ada",
        "principal_tenant": "acme",
        "tenant": "acme",
        "tool": "trips.get",
        "capability_id": "travel.trips.get",
        "capability_version": "1.0.0",
        "outcome": "completed",
        "duration_ms": 1.5,
    }
    fast = built(AuditEvent, {**_CALL_EVENT, **values}, set(values))
    slow = AuditEvent.model_construct(**values)
    assert fast == slow == AuditEvent(**values)
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json()
    # Every field of the model is in the template: a new field must be added there.
    assert list(AuditEvent.model_fields) == list(fast.__dict__)


def test_the_tracer_provider_reader_sees_what_get_tracer_provider_returns() -> None:
    from opentelemetry import trace

    reader = tracer_provider_reader(trace)
    installed = reader()
    # Either nothing is installed yet (None: no recording provider) or the same provider.
    assert installed is None or installed is trace.get_tracer_provider()


def test_the_meter_provider_reader_sees_what_get_meter_provider_returns() -> None:
    from opentelemetry import metrics

    reader = meter_provider_reader(metrics)
    installed = reader()
    # Either nothing is installed yet (None: measurements are dropped) or the same provider.
    assert installed is None or installed is metrics.get_meter_provider()
    assert reader is not metrics.get_meter_provider  # the fast path, not the fallback


class Empty(BaseModel):
    pass


@tool(
    tier="write",
    risk_policy=RiskPolicy(destructive=False, reversible=True, dry_run_supported=False),
)
async def touch(args: Empty) -> Empty:
    """Touch."""
    return Empty()


@pytest.mark.anyio
async def test_the_hosts_audit_events_and_ledger_entries_validate_as_they_were_built() -> None:
    registry = Registry()
    registry.register(touch)
    store = MemoryStore()
    host = Host(registry, store=store)
    principal = Principal(subject="ada", tenant_id="acme", scopes=frozenset())
    request = {"_charter": {"requestId": "0b4a5e4e-6f0b-4c53-9d1d-3a4c2b1e0f00"}}
    await host.invoke("touch", request, principal)
    [event] = await host.audit.events()
    assert list(event.__dict__) == list(AuditEvent.model_fields)
    assert AuditEvent.model_validate(event.model_dump()) == event
    [entry] = store.entries.values()
    assert list(entry.__dict__) == list(LedgerEntry.model_fields)
    assert LedgerEntry.model_validate(entry.model_dump()) == entry


def test_computed_fields_are_the_models_model_computed_fields() -> None:
    class Priced(BaseModel):
        cents: int

        @computed_field  # type: ignore[prop-decorator]
        @property
        def euros(self) -> float:
            return self.cents / 100

    assert computed_fields(Priced) == Priced.model_computed_fields
    assert list(computed_fields(Priced)) == ["euros"]

    class Plain(BaseModel):
        cents: int

    assert computed_fields(Plain) == Plain.model_computed_fields == {}
