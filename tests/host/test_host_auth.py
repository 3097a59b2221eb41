"""Auth modes, required scopes, wildcards, the access catalog and the admin scope, through
``Host.invoke`` (reliability tests S01-S04)."""

from __future__ import annotations

import uuid
from itertools import combinations
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from tests.builders import DESTRUCTIVE_RISK, WRITE_RISK, tiered_tool

from charter import AccessCatalog, Principal, Registry, ToolContext, define_tool
from charter.audit import AuditEvent
from charter.auth import AuthenticationFailed, Credentials, StaticAuthenticator
from charter.errors import ErrorCode
from charter.host import Host
from charter.ledger import MemoryStore
from charter.outcome import Completed, Failed, InteractionRequired

pytestmark = pytest.mark.anyio


class Note(BaseModel):
    text: str = "hello"
    tenant_id: str | None = None


class Echo(BaseModel):
    tool: str
    text: str
    tenant: str


def _registry(seen: list[tuple[str, dict[str, Any]]]) -> Registry:
    """Tools covering every auth mode, scope shape and risk tier the tests need."""

    def handler_for(name: str) -> Any:
        async def handler(note: Note, ctx: ToolContext) -> Echo:
            seen.append((name, note.model_dump()))
            return Echo(tool=name, text=note.text, tenant=ctx.tenant_id)

        return handler

    def add(name: str, **options: Any) -> None:
        tier = options.pop("tier", "read")
        registry.register(tiered_tool(name, tier, handler_for(name), Note, Echo, **options))

    registry = Registry()
    add("ping", auth="public")
    add("whoami")  # no auth mode declared: identity is the default
    add("whoami_declared", auth="identity")
    add("reindex", auth="admin")
    add("read_notes", required_scopes=["notes:read"])
    add("sync_notes", required_scopes=["notes:read", "notes:write"])
    add("send_notice", required_scopes=["notifications:send"])
    add("pii_lookup", required_scopes=["bookings-pii:read"])
    add("edit_note", required_scopes=["notes:write"], tenant_field="tenant_id")
    add(
        "archive_note",
        tier="sensitive",
        risk_policy=WRITE_RISK,
        required_scopes=["notes:write"],
    )
    add(
        "purge_notes",
        tier="destructive",
        risk_policy=DESTRUCTIVE_RISK,
        required_scopes=["notes:delete"],
    )
    return registry


def _host(**options: Any) -> tuple[Host, MemoryStore, list[tuple[str, dict[str, Any]]]]:
    seen: list[tuple[str, dict[str, Any]]] = []
    store = MemoryStore()
    return Host(_registry(seen), store=store, **options), store, seen


def user(*scopes: str, tenant: str = "tenant-a", subject: str = "user-1") -> Principal:
    return Principal(subject=subject, tenant_id=tenant, scopes=frozenset(scopes))


async def last_event(host: Host) -> AuditEvent:
    events = await host.audit.events(limit=1)
    assert events, "the host recorded no audit event"
    return events[0]


def _rid() -> dict[str, str]:
    return {"requestId": str(uuid.uuid4())}


# -- auth modes (S04) ---------------------------------------------------------------------


async def test_an_anonymous_call_to_an_identity_tool_is_unauthenticated() -> None:
    host, _, seen = _host()
    for name in ("whoami", "whoami_declared", "read_notes"):
        outcome = await host.invoke(name, {}, None)
        assert isinstance(outcome, Failed)
        assert outcome.code is ErrorCode.UNAUTHENTICATED
        assert outcome.reason == "authentication_required"
    assert seen == []


async def test_a_tool_without_a_declared_auth_mode_requires_an_identity() -> None:
    host, _, _ = _host()
    registered = host.registry.get("whoami")
    assert registered is not None and registered.tool.auth == "identity"
    assert registered.entry["auth"] == "identity"
    anonymous = await host.invoke("whoami", {}, None)
    assert isinstance(anonymous, Failed) and anonymous.code is ErrorCode.UNAUTHENTICATED
    signed_in = await host.invoke("whoami", {}, user())
    assert isinstance(signed_in, Completed)


async def test_an_admin_tool_called_without_the_admin_scope_is_denied_as_admin_required() -> None:
    host, _, seen = _host()
    for principal in (user(), user("notes:read", "*", "*:*", "admin:*")):
        outcome = await host.invoke("reindex", {}, principal)
        assert isinstance(outcome, Failed)
        assert outcome.code is ErrorCode.AUTHORIZATION_DENIED
        assert outcome.reason == "admin_required"
        assert outcome.meta is not None and outcome.meta["missing"] == ["admin"]
    anonymous = await host.invoke("reindex", {}, None)
    assert isinstance(anonymous, Failed) and anonymous.code is ErrorCode.UNAUTHENTICATED
    assert seen == []


async def test_an_admin_tool_runs_for_the_admin_scope_and_the_use_is_audited() -> None:
    host, _, seen = _host()
    outcome = await host.invoke("reindex", {}, user("admin"))
    assert isinstance(outcome, Completed)
    assert seen == [("reindex", {"text": "hello", "tenant_id": None})]
    event = await last_event(host)
    assert event.admin_used is True and event.tool == "reindex"


async def test_a_public_tool_runs_for_an_anonymous_caller() -> None:
    host, _, seen = _host()
    outcome = await host.invoke("ping", {"text": "x"}, None)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tool": "ping", "text": "x", "tenant": ""}
    assert len(seen) == 1
    event = await last_event(host)
    assert event.subject is None and event.principal_tenant is None


# -- required scopes (S01) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("granted", "missing"),
    [
        ((), ["notes:read", "notes:write"]),
        (("notes:read",), ["notes:write"]),
        (("notes:write",), ["notes:read"]),
        (("notes:read", "notes:write"), []),
        (("notes:read", "notes:write", "files:read"), []),
    ],
)
async def test_required_scopes_are_anded_and_a_denial_names_exactly_the_missing_ones(
    granted: tuple[str, ...], missing: list[str]
) -> None:
    host, _, seen = _host()
    outcome = await host.invoke("sync_notes", {}, user(*granted))
    if not missing:
        assert isinstance(outcome, Completed)
        assert len(seen) == 1
        return
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.AUTHORIZATION_DENIED
    assert outcome.reason == "insufficient_scope"
    assert outcome.meta is not None
    assert outcome.meta["required"] == ["notes:read", "notes:write"]
    assert outcome.meta["granted"] == sorted(granted)
    assert outcome.meta["missing"] == missing
    for scope in missing:
        assert scope in outcome.message
    assert seen == []


@pytest.mark.parametrize("grant", ["notes:read", "*", "*:*", "notes:*", "*:read"])
async def test_each_wildcard_grant_satisfies_a_plain_scope(grant: str) -> None:
    host, _, _ = _host()
    outcome = await host.invoke("read_notes", {}, user(grant))
    assert isinstance(outcome, Completed)
    event = await last_event(host)
    assert event.admin_used is False


@pytest.mark.parametrize("grant", ["*:write", "files:*", "files:read", "notes", "read"])
async def test_grants_for_another_resource_or_action_do_not_satisfy_a_scope(grant: str) -> None:
    host, _, seen = _host()
    outcome = await host.invoke("read_notes", {}, user(grant))
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.AUTHORIZATION_DENIED
    assert outcome.meta is not None and outcome.meta["missing"] == ["notes:read"]
    assert seen == []


async def test_the_access_catalog_keeps_wildcards_off_explicit_actions_and_resources() -> None:
    catalog = AccessCatalog(
        explicit_actions=frozenset({"send"}), explicit_resources=frozenset({"bookings-pii"})
    )
    host, _, _ = _host(access_catalog=catalog)

    async def allowed(tool: str, *scopes: str) -> bool:
        return isinstance(await host.invoke(tool, {}, user(*scopes)), Completed)

    # Explicit action: only the exact grant.
    for wildcard in ("*", "*:*", "notifications:*", "*:send"):
        assert not await allowed("send_notice", wildcard), wildcard
    assert await allowed("send_notice", "notifications:send")
    # Explicit resource: only grants naming it.
    for wildcard in ("*", "*:*", "*:read"):
        assert not await allowed("pii_lookup", wildcard), wildcard
    assert await allowed("pii_lookup", "bookings-pii:*")
    assert await allowed("pii_lookup", "bookings-pii:read")
    # The catalog narrows the wildcards only: ordinary scopes keep them.
    assert await allowed("read_notes", "*")
    # The admin scope satisfies even explicit scopes, and says so in the audit.
    assert await allowed("send_notice", "admin")
    assert (await last_event(host)).admin_used is True


async def test_the_denial_names_the_scopes_even_when_the_catalog_made_a_wildcard_miss() -> None:
    catalog = AccessCatalog(explicit_actions=frozenset({"send"}))
    host, _, _ = _host(access_catalog=catalog)
    outcome = await host.invoke("send_notice", {}, user("*"))
    assert isinstance(outcome, Failed)
    assert outcome.meta is not None
    assert outcome.meta["granted"] == ["*"]
    assert outcome.meta["missing"] == ["notifications:send"]


# -- the property: allowed exactly when required ⊆ granted, or admin is granted -----------

_REQUIRED_UNIVERSE = ("notes:read", "notes:write", "files:read")
_REQUIREMENTS = [
    combo
    for size in range(len(_REQUIRED_UNIVERSE) + 1)
    for combo in combinations(_REQUIRED_UNIVERSE, size)
]


def _property_host() -> Host:
    """One tool per subset of the universe (including the empty one)."""
    registry = Registry()

    async def handler(note: Note) -> Echo:
        return Echo(tool="req", text=note.text, tenant="")

    for index, required in enumerate(_REQUIREMENTS):
        registry.register(
            define_tool(
                name=f"req_{index}",
                description="Requires a subset of the universe.",
                input_schema=Note,
                output_schema=Echo,
                handler=handler,
                tier="read",
                required_scopes=list(required),
            )
        )
    return Host(registry)


_PROPERTY_HOST = _property_host()
_PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""The settings of the property tests over the hosts' tools."""
_REQUIREMENT_INDEX = st.integers(min_value=0, max_value=len(_REQUIREMENTS) - 1)
"""Which of ``_REQUIREMENTS`` (tool ``req_<index>``) a property call makes."""


@_PROPERTY
@given(
    index=_REQUIREMENT_INDEX,
    granted=st.frozensets(st.sampled_from((*_REQUIRED_UNIVERSE, "files:write", "admin"))),
)
async def test_a_call_is_allowed_exactly_when_required_is_a_subset_of_granted_or_admin(
    index: int, granted: frozenset[str]
) -> None:
    host, required = _PROPERTY_HOST, _REQUIREMENTS[index]
    outcome = await host.invoke(f"req_{index}", {}, user(*granted))
    expected = set(required) <= granted or "admin" in granted
    assert isinstance(outcome, Completed) is expected
    event = await last_event(host)
    assert event.admin_used is ("admin" in granted and not set(required) <= granted)
    if not expected:
        assert isinstance(outcome, Failed)
        assert outcome.code is ErrorCode.AUTHORIZATION_DENIED
        assert outcome.meta is not None
        assert outcome.meta["missing"] == [s for s in required if s not in granted]
        assert outcome.meta["required"] == list(required)
        assert outcome.meta["granted"] == sorted(granted)


_WILDCARDS = ("*", "*:*", "notes:*", "files:*", "*:read", "*:write")


def _satisfied(scope: str, granted: frozenset[str]) -> bool:
    """The grammar's model: the exact grant or one of the four wildcard forms."""
    resource, action = scope.split(":")
    return bool({scope, "*", "*:*", f"{resource}:*", f"*:{action}"} & granted)


@_PROPERTY
@given(
    index=_REQUIREMENT_INDEX,
    granted=st.frozensets(st.sampled_from((*_REQUIRED_UNIVERSE, *_WILDCARDS, "admin"))),
)
async def test_with_wildcards_a_call_is_allowed_exactly_when_every_scope_is_covered(
    index: int, granted: frozenset[str]
) -> None:
    host, required = _PROPERTY_HOST, _REQUIREMENTS[index]
    outcome = await host.invoke(f"req_{index}", {}, user(*granted))
    covered = all(_satisfied(scope, granted) for scope in required)
    assert isinstance(outcome, Completed) is (covered or "admin" in granted)
    if isinstance(outcome, Failed):
        assert outcome.meta is not None
        assert outcome.meta["missing"] == [s for s in required if not _satisfied(s, granted)]


# -- look-alike scopes never elevate (S03) --------------------------------------------------

LOOK_ALIKES = [
    ["Admin"],
    ["admin "],
    [" admin"],
    ["admin\u200b"],
    ["\ufeffadmin"],
    ["\u0430dmin"],  # Cyrillic a
    ["\uff41dmin"],  # fullwidth a
    ["adm"],
    ["administrator"],
    ["superadmin"],
    ["admin:*"],
    ["admin:read"],
    ["*"],
    ["*:*"],
]


@pytest.mark.parametrize("claim", LOOK_ALIKES, ids=repr)
async def test_a_look_alike_of_the_admin_scope_never_passes_an_admin_check(
    claim: list[str],
) -> None:
    host, store, seen = _host()
    principal = Principal.from_claims(subject="user-1", tenant_id="tenant-a", scopes=claim)
    admin_tool = await host.invoke("reindex", {}, principal)
    assert isinstance(admin_tool, Failed) and admin_tool.reason == "admin_required"
    foreign = await host.invoke("edit_note", {"tenant_id": "tenant-b"}, principal)
    assert isinstance(foreign, Failed)
    assert foreign.code is ErrorCode.AUTHORIZATION_DENIED
    for event in await host.audit.events():
        assert event.admin_used is False and event.delegated is False
    assert seen == [] and store.entries == {}


@pytest.mark.parametrize(
    "claim",
    ["admin", "admin notes:read", "notes:read", ("admin",) * 1, ["admin", "admin"]],
    ids=repr,
)
async def test_a_scope_claim_that_is_not_a_list_grants_nothing_and_duplicates_add_nothing(
    claim: object,
) -> None:
    host, _, _ = _host()
    principal = Principal.from_claims(subject="user-1", tenant_id="tenant-a", scopes=claim)
    outcome = await host.invoke("reindex", {}, principal)
    if isinstance(claim, str):
        # A space-joined or single string is not a list: no scopes at all.
        assert principal.scopes == frozenset()
        assert isinstance(outcome, Failed) and outcome.reason == "admin_required"
        read = await host.invoke("read_notes", {}, principal)
        assert isinstance(read, Failed) and read.code is ErrorCode.AUTHORIZATION_DENIED
    else:
        assert principal.scopes == frozenset({"admin"})
        assert isinstance(outcome, Completed)


# -- the admin scope satisfies scope checks only (S02) ------------------------------------


async def test_admin_does_not_unpin_a_non_delegable_tool() -> None:
    host, store, seen = _host()
    outcome = await host.invoke("edit_note", {"tenant_id": "tenant-b"}, user("admin"))
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.AUTHORIZATION_DENIED
    assert outcome.reason == "tenant_forbidden"
    assert seen == [] and store.entries == {}
    event = await last_event(host)
    assert event.admin_used is True and event.delegated is False
    assert event.tenant == "tenant-a"


async def test_admin_still_needs_confirmation_for_a_sensitive_tool() -> None:
    host, store, seen = _host()
    controls = _rid()
    outcome = await host.invoke("archive_note", {"_charter": controls}, user("admin"))
    assert isinstance(outcome, InteractionRequired)
    assert outcome.interaction.metadata is not None
    assert outcome.interaction.metadata["code"] == "CONFIRMATION_REQUIRED"
    assert seen == [] and store.entries == {}
    assert (await last_event(host)).admin_used is True
    confirmed = await host.invoke(
        "archive_note", {"_charter": {**controls, "confirmed": True}}, user("admin")
    )
    assert isinstance(confirmed, Completed)
    assert len(seen) == 1


async def test_admin_still_needs_an_approval_for_a_destructive_tool() -> None:
    host, store, seen = _host()
    outcome = await host.invoke(
        "purge_notes", {"_charter": {**_rid(), "confirmed": True}}, user("admin")
    )
    assert isinstance(outcome, InteractionRequired)
    assert outcome.interaction.metadata is not None
    assert outcome.interaction.metadata["code"] == "APPROVAL_REQUIRED"
    assert seen == [] and store.entries == {}
    assert (await last_event(host)).admin_used is True


async def test_admin_input_is_still_validated() -> None:
    host, _, seen = _host()
    outcome = await host.invoke("read_notes", {"text": 5, "extra": True}, user("admin"))
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.INVALID_INPUT
    assert outcome.reason == "validation_failed"
    assert seen == []
    assert (await last_event(host)).admin_used is True


async def test_admin_use_is_audited_only_when_the_admin_scope_was_needed() -> None:
    host, _, _ = _host()
    assert isinstance(await host.invoke("read_notes", {}, user("admin", "notes:read")), Completed)
    assert (await last_event(host)).admin_used is False
    assert isinstance(await host.invoke("read_notes", {}, user("admin")), Completed)
    assert (await last_event(host)).admin_used is True
    assert isinstance(await host.invoke("whoami", {}, user("admin")), Completed)
    assert (await last_event(host)).admin_used is False


async def test_the_admin_scope_is_configurable() -> None:
    host, _, _ = _host(admin_scope="root")
    assert isinstance(await host.invoke("reindex", {}, user("root")), Completed)
    assert isinstance(await host.invoke("read_notes", {}, user("root")), Completed)
    denied = await host.invoke("reindex", {}, user("admin"))
    assert isinstance(denied, Failed) and denied.reason == "admin_required"
    assert denied.meta is not None and denied.meta["missing"] == ["root"]


# -- authentication ------------------------------------------------------------------------


async def test_host_authenticate_turns_credentials_into_the_principal_the_pipeline_uses() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    alice = user("notes:read", subject="alice")
    host = Host(_registry(seen), authenticator=StaticAuthenticator({"tok-alice": alice}))
    assert await host.authenticate(Credentials(bearer="tok-alice")) is alice
    assert await host.authenticate(Credentials()) is None  # nothing sent: anonymous
    with pytest.raises(AuthenticationFailed):
        await host.authenticate(Credentials(bearer="tok-mallory"))
    principal = await host.authenticate(Credentials(api_key="tok-alice"))
    assert isinstance(await host.invoke("read_notes", {}, principal), Completed)
    anonymous = await host.authenticate(Credentials())
    outcome = await host.invoke("read_notes", {}, anonymous)
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.UNAUTHENTICATED


async def test_a_host_without_an_authenticator_sees_every_caller_as_anonymous() -> None:
    host, _, _ = _host()
    assert await host.authenticate(Credentials(bearer="anything")) is None
