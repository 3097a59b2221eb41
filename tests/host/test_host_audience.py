"""Audience and discovery: what a caller may see, and how the host answers for the rest."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from tests.builders import tiered_tool

from charter import Completed, ErrorCode, Failed, Principal, Registry, ToolContext, define_tool
from charter.host import CallOptions, Host

pytestmark = pytest.mark.anyio


class Query(BaseModel):
    text: str = "q"


class Answer(BaseModel):
    tool: str
    audience: str | None


def _registry(*, with_hidden: bool = True, seen: list[str] | None = None) -> Registry:
    calls = seen if seen is not None else []

    def handler_for(name: str) -> Any:
        async def handler(query: Query, ctx: ToolContext) -> Answer:
            calls.append(name)
            return Answer(tool=name, audience=ctx.audience)

        return handler

    registry = Registry()

    def add(name: str, **options: Any) -> None:
        registry.register(tiered_tool(name, "read", handler_for(name), Query, Answer, **options))

    if with_hidden:
        add("get_invoice", audience=["staff"])
    add("get_invoices", audience=["customer"])
    add("faq", auth="public")
    add("public_catalog", auth="public", audience=["customer"])
    add("list_trips", required_scopes=["trips:read"])
    add("rebuild_index", auth="admin")
    return registry


def staff(*scopes: str) -> Principal:
    return Principal(subject="s-1", tenant_id="t-1", scopes=frozenset(scopes), actor="staff")


def customer(*scopes: str) -> Principal:
    return Principal(subject="c-1", tenant_id="t-1", scopes=frozenset(scopes), actor="customer")


async def test_a_tool_outside_the_callers_audience_answers_exactly_like_an_unknown_tool() -> None:
    seen: list[str] = []
    with_hidden = Host(_registry(seen=seen))
    without_it = Host(_registry(with_hidden=False))
    for name in ("get_invoice", "get_invoicx", "get_inv"):
        hidden = await with_hidden.invoke(name, {}, customer())
        unknown = await without_it.invoke(name, {}, customer())
        assert isinstance(hidden, Failed) and hidden.code is ErrorCode.NOT_FOUND
        assert hidden.model_dump_json() == unknown.model_dump_json()
    assert seen == []
    # The audit event does not resolve the hidden tool either.
    hidden_events = await with_hidden.audit.events(limit=3)
    unknown_events = await without_it.audit.events(limit=3)
    for a, b in zip(hidden_events, unknown_events, strict=True):
        keep = {"tool", "capability_id", "capability_version", "outcome", "code", "reason"}
        assert a.model_dump(include=keep) == b.model_dump(include=keep)
        assert a.capability_id is None


async def test_near_matches_come_only_from_tools_the_caller_may_see() -> None:
    host = Host(_registry())
    outcome = await host.invoke("get_invoicx", {}, customer())
    assert isinstance(outcome, Failed) and outcome.meta is not None
    # get_invoice (staff only) is one edit away; only the visible get_invoices is offered.
    assert outcome.meta["candidates"] == ["get_invoices"]
    assert '"get_invoice"' not in outcome.message
    as_staff = await host.invoke("get_invoicx", {}, staff())
    assert isinstance(as_staff, Failed) and as_staff.meta is not None
    assert as_staff.meta["didYouMean"] == "get_invoice"


async def test_an_unknown_name_far_from_every_tool_suggests_nothing_and_lists_nothing() -> None:
    host = Host(_registry())
    outcome = await host.invoke("completely_unrelated_zzz", {}, staff("admin"))
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.NOT_FOUND
    assert outcome.meta == {"candidates": []}
    for name in host.registry.names():
        assert name not in outcome.message


async def test_a_tool_the_caller_lacks_scopes_for_is_not_discovered_but_a_call_names_them() -> None:
    host = Host(_registry())
    names = [entry["name"] for entry in host.discover(staff())]
    assert "list_trips" not in names
    outcome = await host.invoke("list_trips", {}, staff())
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.AUTHORIZATION_DENIED
    assert outcome.meta is not None and outcome.meta["missing"] == ["trips:read"]
    assert "list_trips" in [e["name"] for e in host.discover(staff("trips:read"))]


@pytest.mark.parametrize(
    ("principal", "expected"),
    [
        (None, ["faq"]),
        (staff(), ["get_invoice", "faq"]),
        (staff("trips:read"), ["get_invoice", "faq", "list_trips"]),
        (staff("admin"), ["get_invoice", "faq", "list_trips", "rebuild_index"]),
        (customer(), ["get_invoices", "faq", "public_catalog"]),
        (
            customer("admin"),
            ["get_invoices", "faq", "public_catalog", "list_trips", "rebuild_index"],
        ),
    ],
    ids=["anonymous", "staff", "staff-with-scope", "admin", "customer", "customer-admin"],
)
async def test_discover_returns_exactly_the_tools_the_caller_may_call(
    principal: Principal | None, expected: list[str]
) -> None:
    host = Host(_registry())
    entries = host.discover(principal)
    assert [e["name"] for e in entries] == expected
    for entry in entries:
        registered = host.registry.get(entry["name"])
        assert registered is not None and entry is registered.entry
        outcome = await host.invoke(entry["name"], {}, principal)
        assert isinstance(outcome, Completed), entry["name"]
    # ...and every tool left out is refused.
    for name in set(host.registry.names()) - set(expected):
        assert isinstance(await host.invoke(name, {}, principal), Failed), name


async def test_an_anonymous_caller_sees_an_audience_tool_only_through_that_audience() -> None:
    host = Host(_registry())
    assert [e["name"] for e in host.discover(None, audience="customer")] == [
        "faq",
        "public_catalog",
    ]
    outcome = await host.invoke("public_catalog", {}, None, call=CallOptions(audience="customer"))
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tool": "public_catalog", "audience": "customer"}
    hidden = await host.invoke("public_catalog", {}, None)
    assert isinstance(hidden, Failed) and hidden.code is ErrorCode.NOT_FOUND


async def test_staff_may_call_through_another_audience_and_the_handler_sees_it() -> None:
    host = Host(_registry())
    outcome = await host.invoke("get_invoices", {}, staff(), call=CallOptions(audience="customer"))
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tool": "get_invoices", "audience": "customer"}
    # Through the customer audience, staff-only tools are out of sight.
    hidden = await host.invoke("get_invoice", {}, staff(), call=CallOptions(audience="customer"))
    assert isinstance(hidden, Failed) and hidden.code is ErrorCode.NOT_FOUND
    assert "get_invoice" not in [e["name"] for e in host.discover(staff(), audience="customer")]


async def test_a_customer_cannot_claim_the_staff_audience() -> None:
    seen: list[str] = []
    host = Host(_registry(seen=seen))
    outcome = await host.invoke("get_invoice", {}, customer(), call=CallOptions(audience="staff"))
    unknown = await Host(_registry(with_hidden=False)).invoke("get_invoice", {}, customer())
    assert outcome.model_dump_json() == unknown.model_dump_json()
    assert "get_invoice" not in [e["name"] for e in host.discover(customer(), audience="staff")]
    # The handler of a tool open to every audience sees the customer's own audience.
    faq = await host.invoke("faq", {}, customer(), call=CallOptions(audience="staff"))
    assert isinstance(faq, Completed)
    assert faq.output == {"tool": "faq", "audience": "customer"}
    assert seen == ["faq"]


async def test_an_alias_reaches_its_tool_and_is_audited_under_the_canonical_name() -> None:
    registry = Registry()

    async def handler(query: Query) -> Answer:
        return Answer(tool="renamed", audience=None)

    registry.register(
        define_tool(
            name="renamed",
            aliases=["old_name"],
            description="A tool with an old name.",
            input_schema=Query,
            output_schema=Answer,
            handler=handler,
            tier="read",
        )
    )
    host = Host(registry)
    outcome = await host.invoke("old_name", {}, staff())
    assert isinstance(outcome, Completed)
    events = await host.audit.events(limit=1)
    assert events[0].tool == "renamed" and events[0].capability_id == "renamed"
