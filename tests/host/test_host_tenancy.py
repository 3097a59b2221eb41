"""Tenant pinning and delegation through ``Host.invoke`` (reliability tests T01-T04)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel
from tests.builders import WRITE_RISK, tiered_tool

from charter import ErrorCode, Principal, Registry, ToolContext
from charter.audit import AuditEvent
from charter.auth import holds_control_character
from charter.host import Host
from charter.ledger import MemoryStore
from charter.outcome import Completed, Failed

pytestmark = pytest.mark.anyio


class ForTenant(BaseModel):
    tenant_id: str | None = None
    text: str = "x"


class UserScoped(BaseModel):
    user_id: str | None = None


class Acted(BaseModel):
    tenant: str
    field: str | None
    delegated: bool


@dataclass
class Seen:
    """What handlers received: (tool, input, ctx.tenant_id, ctx.delegated)."""

    calls: list[tuple[str, dict[str, Any], str, bool]] = field(default_factory=list)


def _registry(seen: Seen) -> Registry:
    registry = Registry()

    def add(name: str, schema: type[BaseModel], field_name: str | None, **options: Any) -> None:
        async def handler(data: BaseModel, ctx: ToolContext) -> Acted:
            dumped = data.model_dump()
            seen.calls.append((name, dumped, ctx.tenant_id, ctx.delegated))
            value = dumped.get(field_name) if field_name else None
            return Acted(tenant=ctx.tenant_id, field=value, delegated=ctx.delegated)

        tier = options.pop("tier", "read")
        options.update(tenant_field=field_name)
        registry.register(tiered_tool(name, tier, handler, schema, Acted, **options))

    add("recall", ForTenant, "tenant_id", delegable=True, required_scopes=["memories:read"])
    add("remember", ForTenant, "tenant_id", required_scopes=["memories:read"])
    add(
        "create_memory",
        ForTenant,
        "tenant_id",
        tier="write",
        risk_policy=WRITE_RISK,
        required_scopes=["memories:write"],
    )
    add(
        "update_memory",
        ForTenant,
        "tenant_id",
        tier="write",
        risk_policy=WRITE_RISK,
        delegable=True,
        required_scopes=["memories:write"],
    )
    add("export_all", ForTenant, None, delegable=True)
    add("export_own", ForTenant, None)
    add("seed_delegable", UserScoped, "user_id", delegable=True)
    add("seed_pinned", UserScoped, "user_id")
    add("public_echo", ForTenant, "tenant_id", auth="public")
    return registry


def _host() -> tuple[Host, MemoryStore, Seen]:
    seen = Seen()
    store = MemoryStore()
    return Host(_registry(seen), store=store), store, seen


def user(*scopes: str, tenant: str = "tenant-a", subject: str = "user-1") -> Principal:
    return Principal(subject=subject, tenant_id=tenant, scopes=frozenset(scopes))


READER = user("memories:read", "memories:write")
ADMIN = user("admin", subject="admin-1")


def _rid() -> dict[str, Any]:
    return {"_charter": {"requestId": str(uuid.uuid4())}}


async def last_event(host: Host) -> AuditEvent:
    return (await host.audit.events(limit=1))[0]


def assert_forbidden(outcome: object) -> None:
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.AUTHORIZATION_DENIED
    assert outcome.reason == "tenant_forbidden"


# -- pinning --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "omitted", [{}, {"tenant_id": None}, {"tenant_id": ""}, {"tenant_id": "  "}]
)
async def test_the_tenant_field_is_filled_with_the_callers_tenant_when_omitted(
    omitted: dict[str, Any],
) -> None:
    host, _, seen = _host()
    outcome = await host.invoke("recall", omitted, READER)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tenant": "tenant-a", "field": "tenant-a", "delegated": False}
    assert seen.calls[0][1]["tenant_id"] == "tenant-a"
    event = await last_event(host)
    assert (event.tenant, event.principal_tenant, event.delegated) == (
        "tenant-a",
        "tenant-a",
        False,
    )


async def test_the_callers_own_tenant_padded_with_spaces_is_the_callers_tenant() -> None:
    host, _, seen = _host()
    outcome = await host.invoke("remember", {"tenant_id": "  tenant-a  "}, READER)
    assert isinstance(outcome, Completed)
    assert seen.calls[0][1]["tenant_id"] == "tenant-a"
    assert outcome.output == {"tenant": "tenant-a", "field": "tenant-a", "delegated": False}


@pytest.mark.parametrize("tool", ["recall", "remember"])
async def test_another_tenant_is_forbidden_for_a_caller_without_the_admin_scope(tool: str) -> None:
    host, _, seen = _host()
    assert_forbidden(await host.invoke(tool, {"tenant_id": "tenant-b"}, READER))
    assert seen.calls == []


async def test_an_admin_is_still_pinned_on_a_non_delegable_tool_with_no_effect_and_no_row() -> None:
    host, store, seen = _host()
    for tool, arguments in (
        ("remember", {"tenant_id": "tenant-b"}),
        ("create_memory", {"tenant_id": "tenant-b", **_rid()}),
        ("export_own", {"_charter": {"onBehalfOf": "tenant-b"}}),
    ):
        assert_forbidden(await host.invoke(tool, arguments, ADMIN))
    assert seen.calls == [] and store.entries == {}
    for event in await host.audit.events():
        assert event.tenant == "tenant-a" and event.delegated is False


async def test_a_forbidden_write_leaves_no_row_so_the_corrected_call_runs_with_the_same_id() -> (
    None
):
    host, store, seen = _host()
    controls = _rid()
    assert_forbidden(
        await host.invoke("create_memory", {"tenant_id": "tenant-b", **controls}, READER)
    )
    assert store.entries == {}
    outcome = await host.invoke("create_memory", {**controls}, READER)
    assert isinstance(outcome, Completed) and outcome.replayed is False
    assert len(seen.calls) == 1 and len(store.entries) == 1


# -- delegation -----------------------------------------------------------------------------


async def test_an_admin_on_a_delegable_tool_runs_for_the_named_tenant_and_it_is_audited() -> None:
    host, _, seen = _host()
    outcome = await host.invoke("recall", {"tenant_id": "tenant-b"}, ADMIN)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tenant": "tenant-b", "field": "tenant-b", "delegated": True}
    assert seen.calls == [("recall", {"tenant_id": "tenant-b", "text": "x"}, "tenant-b", True)]
    event = await last_event(host)
    assert event.delegated is True and event.admin_used is True
    assert event.subject == "admin-1"
    assert event.principal_tenant == "tenant-a"
    assert event.tenant == "tenant-b"


async def test_a_delegated_ledgered_write_is_keyed_and_audited_for_the_target_tenant() -> None:
    host, store, _ = _host()
    controls = _rid()
    outcome = await host.invoke("update_memory", {"tenant_id": " tenant-b ", **controls}, ADMIN)
    assert isinstance(outcome, Completed)
    [key] = store.entries
    # Keyed by the target tenant and the admin's own identity (its home tenant, subject).
    assert key[0] == "tenant-b" and key[1] == "tenant-a/admin-1"
    event = await last_event(host)
    assert (event.delegated, event.principal_tenant, event.tenant) == (True, "tenant-a", "tenant-b")
    assert event.request_id == controls["_charter"]["requestId"]


async def test_a_requested_tenant_is_trimmed_before_delegation() -> None:
    host, _, seen = _host()
    outcome = await host.invoke("recall", {"tenant_id": "  other  "}, ADMIN)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tenant": "other", "field": "other", "delegated": True}
    assert seen.calls[0][1]["tenant_id"] == "other"


# -- the seed's resolveActingUserId table (seed-semantics §5.5), through the host ---------

DENIED = "denied"

SEED_TABLE: list[tuple[object, object, bool, object]] = [
    # (requested userId, scope claim, delegable, expected: (tenant, delegated) or DENIED)
    ("other", ["admin"], True, ("other", True)),
    ("other", ["admin"], False, DENIED),
    ("other", ["memories:write"], True, DENIED),
    (None, ["admin"], True, ("key-tenant", False)),
    ("", ["admin"], True, ("key-tenant", False)),
    ("   ", ["admin"], True, ("key-tenant", False)),
    ("", [], False, ("key-tenant", False)),
    ("key-tenant", ["admin"], True, ("key-tenant", False)),
    ("  key-tenant  ", ["admin"], True, ("key-tenant", False)),
    ("  other  ", ["admin"], True, ("other", True)),
    ("other", [], True, DENIED),
    ("other", ["administrator"], True, DENIED),
    ("other", ["admin:read"], True, DENIED),
    ("other", ["superadmin"], True, DENIED),
    ("other", ["x-admin"], True, DENIED),
    ("other", ["Admin"], True, DENIED),
    ("other", "admin", True, DENIED),  # a string claim, not a list: no scopes
]


@pytest.mark.parametrize(("requested", "claim", "delegable", "expected"), SEED_TABLE, ids=repr)
async def test_the_seed_delegation_table_through_the_host(
    requested: object, claim: object, delegable: bool, expected: object
) -> None:
    host, _, seen = _host()
    principal = Principal.from_claims(subject="key-tenant", tenant_id="key-tenant", scopes=claim)
    tool = "seed_delegable" if delegable else "seed_pinned"
    arguments = {} if requested is None else {"user_id": requested}
    outcome = await host.invoke(tool, arguments, principal)
    if expected == DENIED:
        # The original re-pinned a foreign id to the caller's own and ran; charter denies.
        assert_forbidden(outcome)
        assert seen.calls == []
        return
    assert isinstance(outcome, Completed)
    assert isinstance(expected, tuple)
    tenant, delegated = expected
    assert outcome.output == {"tenant": tenant, "field": tenant, "delegated": delegated}
    assert (await last_event(host)).delegated is delegated


@pytest.mark.parametrize("requested", [42, 1.5, True, ["other"], {"id": "other"}], ids=repr)
async def test_a_tenant_that_is_not_a_string_counts_as_omitted(requested: object) -> None:
    host, _, seen = _host()
    outcome = await host.invoke("seed_delegable", {"user_id": requested}, ADMIN)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tenant": "tenant-a", "field": "tenant-a", "delegated": False}
    assert seen.calls[0][2] == "tenant-a"


# -- onBehalfOf -----------------------------------------------------------------------------


async def test_on_behalf_of_delegates_a_delegable_tool_for_an_admin() -> None:
    host, _, seen = _host()
    outcome = await host.invoke("export_all", {"_charter": {"onBehalfOf": " tenant-b "}}, ADMIN)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tenant": "tenant-b", "field": None, "delegated": True}
    assert "_charter" not in seen.calls[0][1]
    event = await last_event(host)
    assert (event.delegated, event.tenant) == (True, "tenant-b")
    # The tool requires no scope: the admin scope was used for the delegation alone.
    assert event.admin_used is True


@pytest.mark.parametrize(
    ("tool", "principal"),
    [("export_all", READER), ("export_own", ADMIN), ("export_own", READER)],
    ids=["delegable-non-admin", "pinned-admin", "pinned-non-admin"],
)
async def test_on_behalf_of_another_tenant_is_forbidden_without_delegation(
    tool: str, principal: Principal
) -> None:
    host, _, seen = _host()
    assert_forbidden(await host.invoke(tool, {"_charter": {"onBehalfOf": "tenant-b"}}, principal))
    assert seen.calls == []


async def test_on_behalf_of_the_callers_own_tenant_is_not_delegation() -> None:
    host, _, _ = _host()
    outcome = await host.invoke("export_own", {"_charter": {"onBehalfOf": "tenant-a"}}, READER)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tenant": "tenant-a", "field": None, "delegated": False}


async def test_an_anonymous_caller_cannot_act_on_behalf_of_anyone() -> None:
    host, _, seen = _host()
    assert_forbidden(
        await host.invoke("public_echo", {"_charter": {"onBehalfOf": "tenant-b"}}, None)
    )
    assert seen.calls == []


async def test_on_behalf_of_and_the_tenant_field_must_agree() -> None:
    host, _, seen = _host()
    assert_forbidden(
        await host.invoke(
            "recall", {"tenant_id": "tenant-b", "_charter": {"onBehalfOf": "tenant-c"}}, ADMIN
        )
    )
    assert seen.calls == []
    # The same tenant, padded differently, is one tenant.
    outcome = await host.invoke(
        "recall", {"tenant_id": "  tenant-b", "_charter": {"onBehalfOf": "tenant-b  "}}, ADMIN
    )
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tenant": "tenant-b", "field": "tenant-b", "delegated": True}


# -- confusables never reach another tenant (T04) -------------------------------------------

CONFUSABLES = [
    "B ",
    " B",
    "b",
    "\u0412",  # Cyrillic Ve, looks like B
    "\u0410",  # Cyrillic A, looks like the caller's own A
    "\uff21",  # fullwidth A (NFKC folds it to A)
    "A\u200b",  # A with a zero-width space
    "A/../B",
    "../A",
    "a",
    "1",
]


@pytest.mark.parametrize("requested", CONFUSABLES, ids=repr)
@pytest.mark.parametrize(
    ("tool", "principal"),
    [
        ("recall", user("memories:read", tenant="A")),
        ("remember", user("admin", tenant="A")),
    ],
    ids=["delegable-non-admin", "pinned-admin"],
)
async def test_a_confusable_tenant_id_never_reaches_another_tenant(
    requested: str, tool: str, principal: Principal
) -> None:
    host, _, seen = _host()
    assert_forbidden(await host.invoke(tool, {"tenant_id": requested}, principal))
    by_control = await host.invoke(tool, {"_charter": {"onBehalfOf": requested}}, principal)
    if holds_control_character(requested):
        # A control no identity could hold (a zero-width space) is refused for its shape.
        assert isinstance(by_control, Failed) and by_control.reason == "invalid_controls"
    else:
        assert_forbidden(by_control)
    assert seen.calls == []


async def test_an_integer_tenant_is_never_read_as_the_string_tenant() -> None:
    host, _, seen = _host()
    as_a = await host.invoke("recall", {"tenant_id": 1}, user("memories:read", tenant="A"))
    assert isinstance(as_a, Completed)
    assert seen.calls[-1][2] == "A" and seen.calls[-1][1]["tenant_id"] == "A"
    as_one = await host.invoke("recall", {"tenant_id": 1}, user("memories:read", tenant="1"))
    assert isinstance(as_one, Completed)
    assert seen.calls[-1][2] == "1"
    assert_forbidden(
        await host.invoke("recall", {"tenant_id": "1"}, user("memories:read", tenant="A"))
    )


async def test_a_duplicated_tenant_key_in_raw_json_is_rejected_before_any_check() -> None:
    host, _, seen = _host()
    outcome = await host.invoke(
        "recall", b'{"tenant_id": "A", "tenant_id": "B"}', user("memories:read", tenant="A")
    )
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.INVALID_INPUT and outcome.reason == "duplicate_key"
    assert seen.calls == []


async def test_on_behalf_of_is_trimmed_exactly_like_the_tenant_field() -> None:
    host, _, _ = _host()
    # JavaScript's trim drops U+FEFF (Python's strip keeps it); "\x85", which only
    # Python's strip drops, is a control onBehalfOf refuses.
    requested = "\ufefftenant-b"
    by_control = await host.invoke("export_all", {"_charter": {"onBehalfOf": requested}}, ADMIN)
    by_field = await host.invoke("recall", {"tenant_id": requested}, ADMIN)
    assert isinstance(by_control, Completed) and isinstance(by_field, Completed)
    assert isinstance(by_control.output, dict) and isinstance(by_field.output, dict)
    assert by_control.output["tenant"] == by_field.output["tenant"]
