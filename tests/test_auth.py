from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from collections.abc import Mapping
from dataclasses import FrozenInstanceError, dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.test_public_api import isort_key

import charter.auth as auth_module
from charter.auth import (
    IDENTITY_PATTERN,
    AccessCatalog,
    AuthenticationFailed,
    Authenticator,
    Credentials,
    Principal,
    StaticAuthenticator,
    audience_allows,
    check_auth_mode,
    enforce_audience,
    has_permission,
    holds_control_character,
    is_valid_scope,
    js_trim,
    missing_scopes,
    parse_scopes,
    resolve_tenant,
    validate_required_scope,
)
from charter.errors import CharterError


def principal(
    scopes: frozenset[str] = frozenset(), *, tenant_id: str = "key-tenant", actor: str = "staff"
) -> Principal:
    return Principal(subject="user-1", tenant_id=tenant_id, scopes=scopes, actor=actor)


# --- Scope grammar and look-alikes (S03) ------------------------------------------------


@pytest.mark.parametrize(
    "scope",
    ["*", "*:*", "admin", "memories:read", "bookings-pii:*", "*:read", "a.b_c-d:x9", "admin:*"],
)
def test_scopes_in_the_grammar_are_valid(scope: str) -> None:
    assert is_valid_scope(scope)


@pytest.mark.parametrize(
    "scope",
    [
        "",
        "Admin",
        "ADMIN",
        "admin ",
        " admin",
        "admin\n",
        "admin\u200b",
        "\ufeffadmin",
        "\uff41dmin",  # fullwidth a
        "\u0430dmin",  # Cyrillic a
        "adm\u0131n",  # dotless i
        "memories:Read",
        "memories:read:extra",
        "memories:",
        ":read",
        "1memories:read",
        "**",
        "*a",
        "a*",
        "memories read",
        "_admin",
    ],
)
def test_look_alikes_and_malformed_scopes_are_invalid(scope: str) -> None:
    assert not is_valid_scope(scope)


def test_a_non_string_is_not_a_valid_scope() -> None:
    assert not is_valid_scope(42)  # type: ignore[arg-type]


def test_parse_scopes_keeps_only_entries_already_valid_and_never_fixes_them_up() -> None:
    claim = ["memories:read", "Admin", "admin ", "admin\u200b", "\uff41dmin", "\u0430dmin", 42]
    assert parse_scopes(claim) == frozenset({"memories:read"})


@pytest.mark.parametrize("claim", ["admin", "admin memories:read", b"admin", None, 42, {"a": 1}])
def test_a_claim_that_is_not_a_list_grants_no_scopes(claim: object) -> None:
    assert parse_scopes(claim) == frozenset()


def test_a_space_joined_string_grants_nothing_where_the_same_scopes_as_an_array_do() -> None:
    assert parse_scopes("admin memories:read") == frozenset()
    assert parse_scopes(["admin", "memories:read"]) == frozenset({"admin", "memories:read"})


@pytest.mark.parametrize("container", [list, tuple, set, frozenset])
def test_lists_tuples_and_sets_are_all_read_as_claims(container: type) -> None:
    assert parse_scopes(container(["a:read", "b:write"])) == frozenset({"a:read", "b:write"})


def test_duplicate_scopes_collapse_and_grant_nothing_extra() -> None:
    granted = parse_scopes(["memories:read", "memories:read", "memories:read"])
    assert granted == frozenset({"memories:read"})
    assert missing_scopes(granted, ["memories:write"]).missing == ("memories:write",)


def test_a_str_subclass_entry_is_read_as_its_plain_string_value() -> None:
    class Sneaky(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    (scope,) = parse_scopes([Sneaky("memories:read")])
    assert type(scope) is str
    assert scope == "memories:read"


@pytest.mark.parametrize(
    "scope",
    ["Admin", "admin ", "admin\u200b", "adm", "admin:*", "*", "*:*", "administrator", "admin:read"],
)
def test_no_look_alike_or_wildcard_is_the_admin_scope(scope: str) -> None:
    granted = parse_scopes([scope])
    assert not check_auth_mode("admin", principal(granted)).ok
    assert resolve_tenant(principal=principal(granted), requested="other", delegable=True).denied


def test_a_required_scope_must_be_a_resource_action_pair_without_wildcards() -> None:
    assert validate_required_scope("trips:write") == "trips:write"
    for bad in ["trips", "trips:*", "*:write", "*", "Trips:write", "trips:write ", "a:b:c"]:
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            validate_required_scope(bad)


# --- Wildcards and the catalog ----------------------------------------------------------


@pytest.mark.parametrize(
    "grant", ["*", "*:*", "bookings:*", "*:read", "bookings:read"], ids=lambda g: f"grant={g}"
)
def test_each_wildcard_form_and_the_exact_scope_satisfy_a_plain_scope(grant: str) -> None:
    assert has_permission(frozenset({grant}), "bookings:read")


@pytest.mark.parametrize(
    "grant", ["bookings", "bookings:write", "*:write", "trips:*", "admin", "admin:*", "read"]
)
def test_grants_for_another_resource_or_action_do_not_satisfy_a_scope(grant: str) -> None:
    assert not has_permission(frozenset({grant}), "bookings:read")


@pytest.mark.parametrize("required", ["bookings", "*:read", "bookings:*", "Bookings:read", ""])
def test_a_malformed_required_scope_is_never_satisfied(required: str) -> None:
    assert not has_permission(frozenset({"*", "*:*", required}), required)


@pytest.mark.parametrize(
    "catalog",
    [
        AccessCatalog(explicit_actions=frozenset({"send"})),
        AccessCatalog(explicit_actions=frozenset({"notifications:send"})),
    ],
    ids=["action-name", "resource-action-pair"],
)
def test_an_explicit_action_is_satisfied_only_by_the_exact_grant(catalog: AccessCatalog) -> None:
    for grant in ["*", "*:*", "notifications:*", "*:send"]:
        assert not has_permission(frozenset({grant}), "notifications:send", catalog)
    assert has_permission(frozenset({"notifications:send"}), "notifications:send", catalog)
    assert has_permission(frozenset({"*"}), "notifications:read", catalog)


def test_an_explicit_resource_is_satisfied_only_by_grants_naming_it() -> None:
    catalog = AccessCatalog(explicit_resources=frozenset({"bookings-pii"}))
    for grant in ["*", "*:*", "*:read"]:
        assert not has_permission(frozenset({grant}), "bookings-pii:read", catalog)
    assert has_permission(frozenset({"bookings-pii:*"}), "bookings-pii:read", catalog)
    assert has_permission(frozenset({"bookings-pii:read"}), "bookings-pii:read", catalog)
    assert has_permission(frozenset({"*"}), "bookings:read", catalog)


def test_an_explicit_action_on_an_explicit_resource_needs_the_exact_grant() -> None:
    catalog = AccessCatalog(
        explicit_actions=frozenset({"export"}), explicit_resources=frozenset({"bookings-pii"})
    )
    assert not has_permission(frozenset({"bookings-pii:*"}), "bookings-pii:export", catalog)
    assert has_permission(frozenset({"bookings-pii:export"}), "bookings-pii:export", catalog)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"explicit_actions": frozenset({"Send"})},
        {"explicit_actions": frozenset({"notifications:*"})},
        {"explicit_resources": frozenset({"bookings-pii:read"})},
        {"explicit_resources": frozenset({"Bookings-PII"})},
    ],
)
def test_a_catalog_entry_that_could_never_match_is_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="AccessCatalog"):
        AccessCatalog(**kwargs)  # type: ignore[arg-type]


def test_a_catalog_given_a_single_string_is_rejected() -> None:
    with pytest.raises(TypeError, match="frozenset"):
        AccessCatalog(explicit_resources="bookings-pii")  # type: ignore[arg-type]


# --- AND semantics and the admin scope (S01, S02) ---------------------------------------

REQUIRED = ("a:read", "b:write")


@pytest.mark.parametrize(
    ("granted", "missing"),
    [
        (set(), ("a:read", "b:write")),
        ({"a:read"}, ("b:write",)),
        ({"b:write"}, ("a:read",)),
        ({"a:read", "b:write"}, ()),
        ({"a:read", "b:write", "c:delete"}, ()),
    ],
)
def test_required_scopes_are_anded_and_denial_names_exactly_the_missing_ones(
    granted: set[str], missing: tuple[str, ...]
) -> None:
    check = missing_scopes(frozenset(granted), REQUIRED)
    assert check.missing == missing
    assert check.allowed is (not missing)
    assert check.admin_used is False


def test_missing_scopes_are_reported_in_required_order_without_repeats() -> None:
    check = missing_scopes(frozenset(), ["z:write", "a:read", "z:write", "m:delete"])
    assert check.missing == ("z:write", "a:read", "m:delete")


def test_an_empty_requirement_is_always_allowed() -> None:
    assert missing_scopes(frozenset(), []).allowed
    assert missing_scopes(frozenset(), []).admin_used is False


def test_the_admin_scope_satisfies_every_scope_check_and_reports_its_use() -> None:
    check = missing_scopes(frozenset({"admin"}), REQUIRED)
    assert check.allowed
    assert check.admin_used is True


def test_admin_use_is_not_reported_when_the_ordinary_grants_suffice() -> None:
    check = missing_scopes(frozenset({"admin", "a:read", "b:write"}), REQUIRED)
    assert check.allowed
    assert check.admin_used is False


def test_the_admin_scope_satisfies_even_scopes_the_catalog_marks_explicit() -> None:
    catalog = AccessCatalog(explicit_resources=frozenset({"bookings-pii"}))
    check = missing_scopes(frozenset({"admin"}), ["bookings-pii:read"], catalog)
    assert check.allowed
    assert check.admin_used is True


def test_the_admin_scope_name_is_configurable_and_can_be_disabled() -> None:
    assert missing_scopes(frozenset({"root"}), REQUIRED, admin_scope="root").allowed
    assert not missing_scopes(frozenset({"admin"}), REQUIRED, admin_scope="root").allowed
    assert not missing_scopes(frozenset({"admin"}), REQUIRED, admin_scope=None).allowed


def test_admin_colon_star_grants_the_admin_resource_not_the_admin_scope() -> None:
    check = missing_scopes(frozenset({"admin:*"}), ["admin:read", "memories:write"])
    assert check.missing == ("memories:write",)
    assert check.admin_used is False


def test_a_single_string_requirement_is_rejected_rather_than_split_into_characters() -> None:
    with pytest.raises(TypeError, match="collection"):
        missing_scopes(frozenset({"admin"}), "memories:read")


UNIVERSE = ("a:read", "a:write", "b:read", "b:write", "c:delete")


@given(
    required=st.lists(st.sampled_from(UNIVERSE), max_size=6),
    granted=st.frozensets(st.sampled_from((*UNIVERSE, "admin"))),
)
def test_allowed_exactly_when_required_is_a_subset_of_granted_or_admin_is_granted(
    required: list[str], granted: frozenset[str]
) -> None:
    check = missing_scopes(granted, required)
    is_admin = "admin" in granted
    assert check.allowed == (set(required) <= granted or is_admin)
    assert check.admin_used == (is_admin and not set(required) <= granted)
    if not is_admin:
        expected = [s for s in dict.fromkeys(required) if s not in granted]
        assert check.missing == tuple(expected)


# --- Auth modes (S04) -------------------------------------------------------------------


def test_a_public_tool_lets_an_anonymous_caller_through() -> None:
    decision = check_auth_mode("public", None)
    assert decision.ok
    assert (decision.code, decision.reason, decision.admin_used) == (None, None, False)


def test_an_identity_tool_rejects_an_anonymous_caller_as_unauthenticated() -> None:
    decision = check_auth_mode("identity", None)
    assert not decision.ok
    assert (decision.code, decision.reason) == ("UNAUTHENTICATED", "authentication_required")


def test_an_identity_tool_lets_any_principal_through() -> None:
    assert check_auth_mode("identity", principal()).ok


def test_an_admin_tool_rejects_an_anonymous_caller_as_unauthenticated() -> None:
    decision = check_auth_mode("admin", None)
    assert (decision.ok, decision.code) == (False, "UNAUTHENTICATED")


def test_an_admin_tool_denies_a_principal_without_the_admin_scope() -> None:
    decision = check_auth_mode("admin", principal(frozenset({"*", "memories:write"})))
    assert not decision.ok
    assert (decision.code, decision.reason) == ("AUTHORIZATION_DENIED", "admin_required")


def test_an_admin_tool_lets_the_admin_scope_through_and_reports_its_use() -> None:
    decision = check_auth_mode("admin", principal(frozenset({"admin"})))
    assert decision.ok
    assert decision.admin_used is True


def test_an_unknown_auth_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="'root'"):
        check_auth_mode("root", principal())  # type: ignore[arg-type]


# --- Audience ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allowed", "audience", "expected"),
    [
        (None, "customer", True),
        ([], "customer", True),
        (["staff"], "customer", False),
        (["staff", "customer"], "customer", True),
        (("partner",), "partner", True),
    ],
)
def test_a_tool_is_visible_to_an_audience_in_its_list_or_to_all_when_none_is_given(
    allowed: list[str] | None, audience: str, expected: bool
) -> None:
    assert audience_allows(allowed, audience) is expected


@pytest.mark.parametrize(
    ("actor", "requested", "expected"),
    [
        ("customer", None, True),
        ("customer", [], True),
        ("staff", ["customer", "partner", "supplier"], True),
        ("customer", ["customer"], True),
        ("customer", ["customer", "partner"], False),
        ("customer", ["partner"], False),
        ("partner", ["customer"], False),
        ("customer", ["customer", "customer"], False),
    ],
)
def test_non_staff_actors_may_query_only_their_own_audience_pool(
    actor: str, requested: list[str] | None, expected: bool
) -> None:
    assert enforce_audience(actor, requested) is expected


def test_an_audience_list_given_as_a_single_string_is_rejected() -> None:
    with pytest.raises(TypeError):
        audience_allows("staff", "s")
    with pytest.raises(TypeError):
        enforce_audience("c", "c")


# --- Principals -------------------------------------------------------------------------


def test_from_claims_reads_the_raw_scope_claim_with_parse_scopes() -> None:
    p = Principal.from_claims(
        subject="u", tenant_id="t", scopes=["memories:read", "Admin", 42], kind="agent"
    )
    assert p.scopes == frozenset({"memories:read"})
    assert p.kind == "agent"
    assert Principal.from_claims(subject="u", tenant_id="t", scopes="admin").scopes == frozenset()


@pytest.mark.parametrize("blank", ["", "   ", "\t\n", "\ufeff"])
@pytest.mark.parametrize("name", ["subject", "tenant_id"])
def test_a_blank_subject_or_tenant_is_rejected(name: str, blank: str) -> None:
    fields = {"subject": "u", "tenant_id": "t"} | {name: blank}
    with pytest.raises(ValueError, match=f"{name} must not be blank"):
        Principal(subject=fields["subject"], tenant_id=fields["tenant_id"], scopes=frozenset())


def test_a_tenant_padded_with_whitespace_is_rejected() -> None:
    with pytest.raises(ValueError, match="whitespace"):
        Principal(subject="u", tenant_id="t ", scopes=frozenset())


IDENTITY_CONTROLS = ["\x00", "\n", "\x1b", "\x7f", "\x85", "\u2028", "\u202e", "\u200b", "\ud800"]


@pytest.mark.parametrize("char", IDENTITY_CONTROLS, ids=[repr(c) for c in IDENTITY_CONTROLS])
@pytest.mark.parametrize("name", ["subject", "tenant_id", "actor"])
def test_a_control_character_in_an_identity_is_rejected(name: str, char: str) -> None:
    fields = {"subject": "u", "tenant_id": "t", "actor": "staff"} | {name: f"acme{char}globex"}
    assert holds_control_character(fields[name])
    with pytest.raises(ValueError, match=f"Principal.{name} .* holds a control character"):
        Principal(
            subject=fields["subject"],
            tenant_id=fields["tenant_id"],
            actor=fields["actor"],
            scopes=frozenset(),
        )


def test_the_identity_pattern_refuses_exactly_what_holds_control_character_does() -> None:
    # The pattern (JSON Schema, for the controls' documents) is written out, not computed
    # at import: checked here against the rule, over the Basic Multilingual Plane.
    pattern = re.compile(IDENTITY_PATTERN)
    for point in range(0x10000):
        char = chr(point)
        if 0xD800 <= point <= 0xDFFF:
            continue  # lone surrogates: refused when a body is read, not by the pattern
        # Inside the value: Python's $ also matches before a final newline (ECMA-262's not).
        assert (pattern.match(f"a{char}b") is None) == holds_control_character(char), hex(point)
    assert pattern.match("   ") is None and pattern.match("") is None


@pytest.mark.parametrize("value", ["société générale", "zoë@exämple", "株式会社", "a\xa0b", "ops"])
def test_letters_of_any_script_and_inner_spaces_are_an_identity(value: str) -> None:
    assert not holds_control_character(value)
    assert Principal(subject=value, tenant_id=value, scopes=frozenset()).tenant_id == value


def test_a_principal_built_directly_must_hold_only_valid_scopes() -> None:
    with pytest.raises(ValueError, match="'Admin'"):
        Principal(subject="u", tenant_id="t", scopes=frozenset({"Admin"}))
    with pytest.raises(TypeError, match="from_claims"):
        Principal(subject="u", tenant_id="t", scopes="admin")  # type: ignore[arg-type]


def test_a_principal_kind_outside_the_literal_is_rejected() -> None:
    with pytest.raises(ValueError, match="kind"):
        Principal(subject="u", tenant_id="t", scopes=frozenset(), kind="root")  # type: ignore[arg-type]


def test_a_principal_is_frozen() -> None:
    p = principal()
    with pytest.raises(FrozenInstanceError):
        p.tenant_id = "other"  # type: ignore[misc]


# --- Delegation: engram's resolveActingUserId table (seed-semantics §5.5) ---------------


@dataclass(frozen=True)
class Row:
    requested: object
    scopes: object
    delegable: bool
    user: str
    delegated: bool
    foreign: bool
    """The requested id (after trim) names a tenant other than the verified one."""


ANY_SCOPES: tuple[object, ...] = (["admin"], [], ["memories:write"], "admin")
NOT_ADMIN = ["administrator", "admin:read", "superadmin", "x-admin", "Admin"]

TABLE: list[Row] = [
    Row("other", ["admin"], True, "other", True, True),
    Row("other", ["admin"], False, "key-tenant", False, True),
    Row("other", ["memories:write"], True, "key-tenant", False, True),
    *(
        Row(requested, scopes, delegable, "key-tenant", False, False)
        for requested in (None, "", "   ", 42)
        for scopes in ANY_SCOPES
        for delegable in (True, False)
    ),
    Row("key-tenant", ["admin"], True, "key-tenant", False, False),
    Row("  key-tenant  ", ["admin"], True, "key-tenant", False, False),
    Row("  other  ", ["admin"], True, "other", True, True),
    Row("other", [], True, "key-tenant", False, True),
    *(Row("other", [scope], True, "key-tenant", False, True) for scope in NOT_ADMIN),
    # Scopes given as the string "admin" (not an array) are not admin: the call is pinned.
    Row("other", "admin", True, "key-tenant", False, True),
]


def row_id(row: Row) -> str:
    return f"req={row.requested!r}-scopes={row.scopes!r}-delegable={row.delegable}"


@pytest.mark.parametrize("row", TABLE, ids=row_id)
def test_resolve_tenant_denies_where_the_original_re_pinned_a_foreign_tenant(row: Row) -> None:
    caller = Principal.from_claims(subject="u", tenant_id="key-tenant", scopes=row.scopes)
    decision = resolve_tenant(principal=caller, requested=row.requested, delegable=row.delegable)
    if row.delegated:
        assert decision == auth_module.TenantDecision(tenant_id=row.user, delegated=True)
    elif row.foreign:
        assert decision.denied
        assert decision.reason == "tenant_forbidden"
        assert decision.tenant_id == "key-tenant"
        assert decision.delegated is False
    else:
        assert decision == auth_module.TenantDecision(tenant_id="key-tenant")


def test_a_non_delegable_tool_pins_even_an_admin_by_denying_the_foreign_tenant() -> None:
    decision = resolve_tenant(
        principal=principal(frozenset({"admin"})), requested="tenant-b", delegable=False
    )
    assert decision.denied
    assert decision.tenant_id == "key-tenant"


def test_delegation_uses_the_configured_admin_scope() -> None:
    root = principal(frozenset({"root"}))
    assert resolve_tenant(
        principal=root, requested="b", delegable=True, admin_scope="root"
    ).delegated
    assert resolve_tenant(principal=root, requested="b", delegable=True).denied
    admin = principal(frozenset({"admin"}))
    assert resolve_tenant(principal=admin, requested="b", delegable=True, admin_scope=None).denied


@pytest.mark.parametrize(
    "requested",
    ["B ", "b", "\u0410", "A\u200b", "A/../B", "\uff21", "\u1d2c"],
    ids=["padded", "case", "cyrillic", "zero-width", "path", "fullwidth", "modifier"],
)
def test_tenant_look_alikes_are_foreign_and_denied_for_a_non_admin(requested: str) -> None:
    decision = resolve_tenant(
        principal=principal(tenant_id="A"), requested=requested, delegable=True
    )
    assert decision.denied
    assert decision.tenant_id == "A"


@pytest.mark.parametrize(
    "requested",
    [
        # Trimmed, the caller's own tenant: not delegation.
        *(" A ", "\ufeffA\u3000", "\u2028A\t"),
        # Not a string: no tenant requested.
        *(1, None, ["B"], {"id": "B"}, b"B"),
    ],
)
def test_a_requested_tenant_trimmed_to_the_callers_own_or_not_a_string_gives_the_callers_own(
    requested: object,
) -> None:
    decision = resolve_tenant(
        principal=principal(frozenset({"admin"}), tenant_id="A"),
        requested=requested,
        delegable=True,
    )
    assert decision == auth_module.TenantDecision(tenant_id="A")


# --- js_trim ----------------------------------------------------------------------------

# Code points JavaScript's String.prototype.trim strips (Node 20, every code point checked).
JS_WHITESPACE = {
    *"\t\n\v\f\r \xa0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff",
    *(chr(c) for c in range(0x2000, 0x200B)),
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("\ufeffx\ufeff", "x"),  # str.strip keeps U+FEFF
        ("\x1cx\x1f", "\x1cx\x1f"),  # str.strip removes U+001C..U+001F
        ("\x85x", "\x85x"),  # str.strip removes NEL
        ("\u200bx\u200b", "\u200bx\u200b"),  # zero-width space is not whitespace
        ("\u180ex", "\u180ex"),  # Mongolian vowel separator: no longer whitespace
        ("\u3000x\u2029", "x"),
        ("  a b  ", "a b"),
        ("", ""),
        (" \t\n ", ""),
    ],
)
def test_js_trim_matches_javascript_where_str_strip_differs(value: str, expected: str) -> None:
    assert js_trim(value) == expected


def test_js_trim_strips_exactly_javascripts_whitespace_over_every_code_point() -> None:
    stripped = {chr(c) for c in range(sys.maxunicode + 1) if not js_trim(chr(c))}
    assert stripped == JS_WHITESPACE
    assert js_trim("a\u3000\ufeffb") == "a\u3000\ufeffb"


# --- Authentication ---------------------------------------------------------------------

ALICE = Principal(subject="alice", tenant_id="t1", scopes=frozenset({"memories:read"}))
BOB = Principal(subject="bob", tenant_id="t2", scopes=frozenset({"admin"}), kind="agent")
CAROL = Principal(subject="carol", tenant_id="t3", scopes=frozenset())
TOKENS: Mapping[str, Principal] = {"tok-alice": ALICE, "tok-bob": BOB, "tök-çarol": CAROL}


@pytest.mark.anyio
async def test_a_known_bearer_token_or_api_key_authenticates_its_principal() -> None:
    authenticator = StaticAuthenticator(TOKENS)
    assert await authenticator.authenticate(Credentials(bearer="tok-alice")) is ALICE
    assert await authenticator.authenticate(Credentials(api_key="tok-bob")) is BOB


@pytest.mark.anyio
async def test_a_token_matches_whatever_its_position_in_the_table() -> None:
    authenticator = StaticAuthenticator(TOKENS)
    for token, expected in TOKENS.items():
        assert await authenticator.authenticate(Credentials(bearer=token)) is expected


@pytest.mark.anyio
async def test_no_credentials_means_an_anonymous_caller() -> None:
    authenticator = StaticAuthenticator(TOKENS)
    headers = {"x-other": "1"}
    assert await authenticator.authenticate(Credentials()) is None
    assert await authenticator.authenticate(Credentials(headers=headers)) is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    "credentials",
    [
        Credentials(bearer="tok-eve"),
        Credentials(bearer=""),
        Credentials(bearer="tok-alic"),
        Credentials(bearer="tok-alice "),
        Credentials(bearer="TOK-ALICE"),
        Credentials(api_key="tok-alice\x00"),
        Credentials(bearer="tok-alice", api_key="tok-alice"),
        Credentials(bearer="\ud800"),
    ],
    ids=["unknown", "empty", "prefix", "padded", "case", "nul", "both", "lone-surrogate"],
)
async def test_bad_credentials_raise_authentication_failed(credentials: Credentials) -> None:
    with pytest.raises(AuthenticationFailed):
        await StaticAuthenticator(TOKENS).authenticate(credentials)


def test_authentication_failed_is_a_charter_error() -> None:
    assert issubclass(AuthenticationFailed, CharterError)


def test_static_authenticator_rejects_an_empty_token() -> None:
    with pytest.raises(ValueError, match="empty"):
        StaticAuthenticator({"": ALICE})


def test_static_authenticator_is_an_authenticator() -> None:
    authenticator: Authenticator = StaticAuthenticator(TOKENS)
    assert isinstance(authenticator, Authenticator)


def test_secrets_stay_out_of_reprs() -> None:
    credentials = Credentials(bearer="s3cret", api_key="k3y", headers={"authorization": "s3cret"})
    assert "s3cret" not in repr(credentials)
    assert "k3y" not in repr(credentials)
    assert "tok-alice" not in repr(StaticAuthenticator(TOKENS))


def test_credentials_headers_are_a_read_only_copy_left_out_of_the_hash() -> None:
    source = {"x-tenant": "a"}
    credentials = Credentials(headers=source)
    source["x-tenant"] = "b"
    assert credentials.headers["x-tenant"] == "a"
    with pytest.raises(TypeError):
        credentials.headers["x-tenant"] = "c"  # type: ignore[index]
    assert hash(credentials) == hash(Credentials(headers={"other": "x"}))


# --- Module surface ---------------------------------------------------------------------


def test_all_is_sorted_and_lists_every_public_name_of_the_package() -> None:
    modules = [
        importlib.import_module(f"charter.auth.{info.name}")
        for info in pkgutil.iter_modules(auth_module.__path__)
    ]
    public = {
        name
        for module in modules
        for name, value in vars(module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", None) == module.__name__
        and (isinstance(value, type) or callable(value))
    }
    assert len(modules) > 1
    assert {name for module in modules for name in module.__all__} == set(auth_module.__all__)
    assert list(auth_module.__all__) == sorted(auth_module.__all__, key=isort_key)
    assert public <= set(auth_module.__all__)
    assert {"AuthMode", "PrincipalKind"} <= set(auth_module.__all__)
