"""``/v1/effects`` on a live server: the outbox of the caller's tenant, approvers and
admins see all of it, other callers what their own calls staged, and only the admin scope
names another tenant, in the list and by key; documented in the OpenAPI document."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pytest
from http_support import serve
from tests.effects.kit import AGENT, SAME_SUBJECT_OTHER_TENANT, FakeProvider, build, refund

from charter import Principal
from charter.auth import StaticAuthenticator
from charter.host import Host
from charter.http import create_app

OTHER_AGENT = Principal(subject="agent-bo", tenant_id="acme", scopes=frozenset({"bookings:refund"}))
APPROVER = Principal(
    subject="sam", tenant_id="acme", kind="person", scopes=frozenset({"charter:approve"})
)
ADMIN = Principal(subject="olga", tenant_id="acme", kind="person", scopes=frozenset({"admin"}))
GLOBEX_ADMIN = Principal(
    subject="olga", tenant_id="globex", kind="person", scopes=frozenset({"admin"})
)
"""Another tenant's admin with the acme admin's subject."""
ADMIN_AGENT = Principal(subject="bot", tenant_id="acme", kind="agent", scopes=frozenset({"admin"}))
WILDCARDS = {
    grant: Principal(subject="wild", tenant_id="acme", kind="person", scopes=frozenset({grant}))
    for grant in ("*", "*:*", "charter:*", "charter:approve")
}
TOKENS = {
    **{f"wild {grant}": principal for grant, principal in WILDCARDS.items()},
    "globex-admin": GLOBEX_ADMIN,
    "admin-agent": ADMIN_AGENT,
    "agent": AGENT,
    "other-agent": OTHER_AGENT,
    "globex-agent": SAME_SUBJECT_OTHER_TENANT,
    "approver": APPROVER,
    "admin": ADMIN,
}


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, Host, dict[str, str]]]:
    host, _ = build(
        provider=FakeProvider(failures=10**9), authenticator=StaticAuthenticator(TOKENS)
    )
    mine, theirs, foreign = (str(uuid.uuid4()) for _ in range(3))

    async def stage() -> None:
        await refund(host, request_id=mine, booking_id="bk_mine")
        await refund(host, request_id=theirs, principal=OTHER_AGENT, booking_id="bk_theirs")
        await refund(host, request_id=foreign, principal=SAME_SUBJECT_OTHER_TENANT)

    asyncio.run(stage())
    with serve(create_app(host, mcp=False, console=False)) as url:
        yield url, host, {"mine": mine, "theirs": theirs, "foreign": foreign}


def get(url: str, token: str | None, **params: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{url}/v1/effects", params=params, headers=headers, timeout=10)


def test_a_caller_sees_the_effects_its_own_calls_staged(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, ids = live
    body = get(url, "agent").json()
    assert body["tenant"] == "acme"
    [effect] = body["effects"]
    assert effect["requestId"] == ids["mine"]
    assert effect["name"] == "payments.refund" and effect["tool"] == "bookings.refund"
    assert effect["status"] == "pending" and effect["attempts"] == 1
    assert effect["payload"] == {"booking_id": "bk_mine", "amount_cents": 500}
    assert "ConnectionError" in effect["lastError"]
    assert effect["key"].startswith("eff_")
    assert "leasedBy" not in effect


def test_approvers_and_admins_see_the_whole_tenant_and_filter_it(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, ids = live
    for token in ("approver", "admin"):
        seen = {e["requestId"] for e in get(url, token).json()["effects"]}
        assert seen == {ids["mine"], ids["theirs"]}
    one = get(url, "approver", requestId=ids["theirs"]).json()["effects"]
    assert [e["requestId"] for e in one] == [ids["theirs"]]
    assert get(url, "approver", status="dead").json()["effects"] == []
    assert len(get(url, "approver", status="pending").json()["effects"]) == 2


def test_only_the_admin_scope_reads_another_tenants_effects(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, ids = live
    forbidden = get(url, "approver", tenant="globex")
    assert forbidden.status_code == 403 and forbidden.json()["reason"] == "tenant_forbidden"
    globex = get(url, "admin", tenant="globex").json()
    assert [e["requestId"] for e in globex["effects"]] == [ids["foreign"]]
    # The same subject in another tenant sees its own tenant's effect only.
    assert [e["requestId"] for e in get(url, "globex-agent").json()["effects"]] == [ids["foreign"]]


def test_bad_queries_and_missing_credentials_are_refused(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, _ = live
    assert get(url, None).status_code == 401
    bad = get(url, "agent", status="lost")
    assert bad.status_code == 422 and bad.json()["meta"]["parameter"] == "status"
    assert get(url, "agent", limit="0").status_code == 422


def test_the_openapi_document_describes_the_route(live: tuple[str, Host, dict[str, str]]) -> None:
    url, _, _ = live
    document = httpx.get(f"{url}/v1/openapi.json", timeout=10).json()
    operation = document["paths"]["/v1/effects"]["get"]
    assert operation["operationId"] == "listEffects"
    schema = document["components"]["schemas"]["Effects"]
    assert schema["properties"]["effects"]["items"] == {"$ref": "#/components/schemas/Effect"}
    effect = document["components"]["schemas"]["Effect"]["properties"]
    assert effect["status"]["enum"] == ["pending", "delivered", "dead", "discarded"]


# -- GET /v1/effects/{key} ---------------------------------------------------------------------


def read(url: str, token: str | None, path: str, **params: str) -> httpx.Response:
    """``GET /v1/effects/<path>``; ``path`` is sent as written (percent-encoding included)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{url}/v1/effects/{path}", params=params, headers=headers, timeout=10)


def keys(url: str, ids: dict[str, str]) -> dict[str, str]:
    """The key of each staged effect ("mine", "theirs", "foreign"), from the list."""
    listed = [
        *get(url, "admin").json()["effects"],
        *get(url, "admin", tenant="globex").json()["effects"],
    ]
    by_request = {e["requestId"]: e["key"] for e in listed}
    return {name: by_request[request_id] for name, request_id in ids.items()}


def assert_no_such_effect(response: httpx.Response, key: str) -> None:
    """The 404 of an unknown key: an effect the caller may not see answers exactly this."""
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert (body["code"], body["reason"]) == ("NOT_FOUND", "effect_not_found")
    assert body["detail"] == f"No effect {key!r} in the outbox."


def test_a_caller_reads_its_own_effect_by_key_as_the_list_shows_it(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, _ = live
    [listed] = get(url, "agent").json()["effects"]
    one = read(url, "agent", listed["key"])
    assert one.status_code == 200, one.text
    assert one.json() == listed
    # Approvers and admins see every effect of their tenant, as in the list.
    for token in ("approver", "admin"):
        assert read(url, token, listed["key"]).json() == listed


def test_an_effect_the_list_hides_is_404_exactly_like_an_unknown_key(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, ids = live
    key = keys(url, ids)
    # Another agent of the tenant did not stage it, nor did a wildcard grant holder.
    assert read(url, "other-agent", key["theirs"]).status_code == 200
    assert_no_such_effect(read(url, "other-agent", key["mine"]), key["mine"])
    assert_no_such_effect(read(url, "wild *", key["mine"]), key["mine"])
    unknown = "eff_" + "0" * 64
    assert_no_such_effect(read(url, "agent", unknown), unknown)
    hidden = read(url, "other-agent", key["mine"]).json()
    missing = read(url, "other-agent", unknown).json()
    assert hidden == {**missing, "detail": missing["detail"].replace(unknown, key["mine"])}


def test_the_same_subject_in_another_tenant_reads_only_its_own_tenants_effect(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, ids = live
    key = keys(url, ids)
    assert read(url, "globex-agent", key["foreign"]).json()["requestId"] == ids["foreign"]
    assert_no_such_effect(read(url, "globex-agent", key["mine"]), key["mine"])
    assert_no_such_effect(read(url, "agent", key["foreign"]), key["foreign"])
    # Naming another tenant is the admin scope's alone, as in the list (before any key).
    for token, tenant in (("globex-agent", "acme"), ("approver", "globex")):
        refused = read(url, token, key["mine"], tenant=tenant)
        assert refused.status_code == 403 and refused.json()["reason"] == "tenant_forbidden"


def test_an_admin_reads_another_tenants_effect_only_naming_the_tenant(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, ids = live
    key = keys(url, ids)
    # Like the list: the admin's own tenant unless it names another.
    assert_no_such_effect(read(url, "admin", key["foreign"]), key["foreign"])
    named = read(url, "admin", key["foreign"], tenant="globex")
    assert named.status_code == 200, named.text
    assert named.json() == get(url, "admin", tenant="globex").json()["effects"][0]
    assert_no_such_effect(read(url, "admin", key["mine"], tenant="globex"), key["mine"])
    assert read(url, "admin", key["mine"], tenant="acme").json()["requestId"] == ids["mine"]


def test_reading_an_effect_without_credentials_is_the_lists_401(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, ids = live
    key = keys(url, ids)
    anonymous = read(url, None, key["mine"])
    listing = get(url, None)
    assert anonymous.status_code == listing.status_code == 401
    assert anonymous.json() == listing.json()
    assert anonymous.headers["WWW-Authenticate"] == listing.headers["WWW-Authenticate"]


def test_a_percent_encoded_key_reads_the_same_effect(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, ids = live
    key = keys(url, ids)["mine"]
    encoded = "".join(f"%{byte:02X}" for byte in key.encode())
    one = read(url, "agent", encoded)
    assert one.status_code == 200, one.text
    assert one.json()["key"] == key


def test_a_get_of_a_key_ending_in_an_action_reads_that_key_and_changes_nothing(
    dead: tuple[str, FakeProvider, str],
) -> None:
    url, provider, key = dead
    provider.failures = 0
    for suffix in (":retry", "%3Aretry", ":discard", "%3adiscard"):
        asked = key + suffix.replace("%3A", ":").replace("%3a", ":")
        assert_no_such_effect(read(url, "admin", key + suffix), asked)
    assert read(url, "admin", key).json()["status"] == "dead"
    changes = {"effect.retry", "effect.discard"}
    assert not [e for e in get_audit(url, "admin") if e["action"] in changes]
    # Any other method there is still the action's path: 405, allowing POST.
    wrong = httpx.put(
        f"{url}/v1/effects/{key}:retry", headers={"Authorization": "Bearer admin"}, timeout=10
    )
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    # And a POST there still acts.
    assert post(url, "admin", f"{key}:retry").json()["status"] == "pending"


def test_the_openapi_document_describes_reading_one_effect(
    live: tuple[str, Host, dict[str, str]],
) -> None:
    url, _, _ = live
    document = httpx.get(f"{url}/v1/openapi.json", timeout=10).json()
    operation = document["paths"]["/v1/effects/{key}"]["get"]
    assert operation["operationId"] == "getEffect"
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/Effect"}
    assert {"401", "403", "404"} <= set(operation["responses"])
    parameters = {(p["name"], p["in"]) for p in operation["parameters"]}
    assert parameters == {("key", "path"), ("tenant", "query")}


@pytest.fixture
def dead() -> Iterator[tuple[str, FakeProvider, str]]:
    """A live server whose one effect is dead (its provider failed every attempt)."""
    provider = FakeProvider(failures=10**9)
    host, _ = build(provider=provider, max_attempts=2, authenticator=StaticAuthenticator(TOKENS))
    request_id = str(uuid.uuid4())

    async def stage() -> str:
        await refund(host, request_id=request_id)
        while (await host.effects.list(request_id=request_id))[0].status != "dead":
            await host.effects.work(once=True)
        return (await host.effects.list(request_id=request_id))[0].key

    key = asyncio.run(stage())
    with serve(create_app(host, mcp=False, console=False)) as url:
        yield url, provider, key


def post(url: str, token: str | None, path: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{url}/v1/effects/{path}", headers=headers, timeout=10)


def test_an_admin_retries_a_dead_effect_and_it_is_delivered_once(
    dead: tuple[str, FakeProvider, str],
) -> None:
    url, provider, key = dead
    provider.failures = 0
    retried = post(url, "admin", f"{key}:retry")
    assert retried.status_code == 200, retried.text
    assert retried.json()["key"] == key and retried.json()["status"] == "pending"
    assert retried.json()["attempts"] == 0
    # Retrying what is no longer dead or discarded is refused with the state it is in.
    again = post(url, "admin", f"{key}:retry")
    assert again.status_code == 422
    assert again.json()["reason"] == "effect_state" and again.json()["meta"]["status"] == "pending"
    events = get_audit(url, "admin")
    [event] = [e for e in events if e["action"] == "effect.retry"]
    assert event["subject"] == "olga" and event["note"] == key and event["adminUsed"] is True


def test_an_admin_discards_a_dead_effect_for_good(dead: tuple[str, FakeProvider, str]) -> None:
    url, _, key = dead
    discarded = post(url, "admin", f"{key}:discard")
    assert discarded.status_code == 200, discarded.text
    assert discarded.json()["status"] == "discarded"
    twice = post(url, "admin", f"{key}:discard")
    assert twice.status_code == 422 and twice.json()["meta"]["status"] == "discarded"
    [event] = [e for e in get_audit(url, "admin") if e["action"] == "effect.discard"]
    assert event["note"] == key
    # A discarded effect can be re-driven.
    assert post(url, "admin", f"{key}:retry").json()["status"] == "pending"


def test_only_admins_change_effects_and_unknown_keys_are_404(
    dead: tuple[str, FakeProvider, str],
) -> None:
    url, _, key = dead
    assert post(url, None, f"{key}:retry").status_code == 401
    for token in ("agent", "approver"):
        refused = post(url, token, f"{key}:retry")
        assert refused.status_code == 403 and refused.json()["reason"] == "insufficient_scope"
        assert 'scope="admin"' in refused.headers["WWW-Authenticate"]
    assert get(url, "admin", status="dead").json()["effects"][0]["key"] == key
    missing = post(url, "admin", "eff_nope:discard")
    assert missing.status_code == 404 and missing.json()["reason"] == "effect_not_found"
    assert post(url, "admin", f"{key}:explode").status_code in (404, 405)


def test_no_wildcard_grant_and_no_agent_changes_an_effect_even_holding_admin(
    dead: tuple[str, FakeProvider, str],
) -> None:
    url, _, key = dead
    for grant in WILDCARDS:
        refused = post(url, f"wild {grant}", f"{key}:retry")
        assert refused.status_code == 403 and refused.json()["reason"] == "insufficient_scope"
    # Re-driving or giving up on an effect is a person's act, as deciding an approval is.
    agent = post(url, "admin-agent", f"{key}:retry")
    assert agent.status_code == 403 and agent.json()["reason"] == "not_a_person"
    # Nor does a wildcard see the tenant's effects (it staged none) or name another tenant.
    for grant in ("*", "*:*", "charter:*"):
        assert get(url, f"wild {grant}").json()["effects"] == []
        assert get(url, f"wild {grant}", tenant="globex").status_code == 403
    assert get(url, "admin", status="dead").json()["effects"][0]["key"] == key


def test_another_tenants_admin_changes_an_effect_audited_as_its_own_principal(
    dead: tuple[str, FakeProvider, str],
) -> None:
    url, _, key = dead
    assert post(url, "globex-admin", f"{key}:discard").json()["status"] == "discarded"
    [event] = [e for e in get_audit(url, "admin") if e["action"] == "effect.discard"]
    assert (event["subject"], event["principalTenant"], event["tenant"]) == (
        "olga",
        "globex",
        "acme",
    )
    assert event["delegated"] is True and event["adminUsed"] is True
    # The acme admin with the same subject did not do it: its own events show none.
    own = [e for e in get_audit(url, "admin") if e["principalTenant"] == "acme"]
    assert not [e for e in own if e["action"] == "effect.discard"]


def test_the_openapi_document_describes_retry_and_discard(
    dead: tuple[str, FakeProvider, str],
) -> None:
    url, _, _ = dead
    document = httpx.get(f"{url}/v1/openapi.json", timeout=10).json()
    for action in ("retry", "discard"):
        operation = document["paths"][f"/v1/effects/{{key}}:{action}"]["post"]
        assert operation["operationId"] == f"{action}Effect"
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok == {"$ref": "#/components/schemas/Effect"}
        assert {"403", "404", "422"} <= set(operation["responses"])


def get_audit(url: str, token: str) -> list[dict[str, object]]:
    response = httpx.get(
        f"{url}/v1/audit", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    events: list[dict[str, object]] = response.json()["events"]
    return events
