"""``GET /v1/effects`` on a live server: the outbox of the caller's tenant, approvers and
admins see all of it, other callers what their own calls staged, and only the admin scope
names another tenant; documented in the OpenAPI document."""

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
TOKENS = {
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
