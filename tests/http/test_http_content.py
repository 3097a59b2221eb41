"""``/v1/resources`` and ``/v1/prompts``: the host's decisions over REST, on a real server."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from http_support import serve

from charter.http import create_app
from content_support import build_content_host


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(create_app(build_content_host(), mcp=False)) as served:
        yield served


def client(url: str, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, headers=headers, timeout=10)


def test_an_agent_lists_and_reads_its_tenants_trip_by_encoded_or_plain_uri(url: str) -> None:
    with client(url, "ada-token") as http:
        listed = http.get("/v1/resources").json()
        encoded = http.get("/v1/resources/" + quote("trip://T-1", safe=""))
        plain = http.get("/v1/resources/trip://T-2")
        logo = http.get("/v1/resources/" + quote("logo://travel.png", safe=""))
    assert [r["uri"] for r in listed["resources"]] == ["handbook://travel", "logo://travel.png"]
    assert listed["resourceTemplates"][0]["uriTemplate"] == "trip://{trip_id}"
    assert encoded.status_code == 200
    [contents] = encoded.json()["contents"]
    assert contents["mimeType"] == "application/json"
    assert json.loads(contents["text"])["name"] == "Lisbon offsite"
    assert json.loads(plain.json()["contents"][0]["text"])["name"] == "Lima sales trip"
    assert base64.b64decode(logo.json()["contents"][0]["blob"]) == b"\x89PNG\r\n\x1a\n"


def test_another_tenant_a_missing_scope_and_anonymous_callers_are_refused(url: str) -> None:
    trip = "/v1/resources/" + quote("trip://T-1", safe="")
    with client(url, "gus-token") as http:
        foreign = http.get(trip)
    with client(url, "newt-token") as http:
        unscoped = http.get(trip)
        listed = http.get("/v1/resources").json()
    with client(url) as http:
        anonymous = http.get(trip)
        public = http.get("/v1/resources/" + quote("handbook://travel", safe=""))
    assert foreign.status_code == 404
    assert foreign.json()["code"] == "NOT_FOUND"
    assert unscoped.status_code == 403
    # The same meta as a tool's insufficient-scope refusal (one ScopeChecks decides both).
    assert unscoped.json()["meta"] == {
        "required": ["trips:read"],
        "granted": ["notes:read"],
        "missing": ["trips:read"],
    }
    assert listed["resourceTemplates"] == []
    assert anonymous.status_code == 401
    assert public.status_code == 200


def test_invalid_uris_and_unknown_resources_are_typed_problems(url: str) -> None:
    with client(url, "ada-token") as http:
        invalid = http.get("/v1/resources/" + quote("trip://not-a-trip", safe=""))
        unknown = http.get("/v1/resources/" + quote("nope://x", safe=""))
    assert invalid.status_code == 422
    assert invalid.json()["code"] == "INVALID_INPUT"
    assert unknown.status_code == 404


def test_prompts_are_listed_and_got_for_the_callers_tenant(url: str) -> None:
    with client(url, "ada-token") as http:
        listed = http.get("/v1/prompts").json()
        got = http.post("/v1/prompts/trips.summary:get", json={"trip_id": "T-1"})
        bad = http.post("/v1/prompts/trips.summary:get", json={"trip_id": 7})
        missing = http.post("/v1/prompts/trips.summary:get")
        unknown = http.post("/v1/prompts/nope:get", json={})
    with client(url, "gus-token") as http:
        foreign = http.post("/v1/prompts/trips.summary:get", json={"trip_id": "T-1"})
    with client(url, "newt-token") as http:
        unscoped = http.post("/v1/prompts/trips.summary:get", json={"trip_id": "T-1"})
    [entry] = listed["prompts"]
    assert entry["name"] == "trips.summary"
    assert [a["name"] for a in entry["arguments"]] == ["trip_id", "tone"]
    assert got.status_code == 200
    assert got.json()["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Summarise Lisbon offsite."}}
    ]
    assert (bad.status_code, missing.status_code, unknown.status_code) == (422, 422, 404)
    assert foreign.status_code == 404  # the handler finds no such trip in globex
    assert unscoped.status_code == 403


def test_the_openapi_document_describes_resources_and_prompts(url: str) -> None:
    # Imported here: every pytest worker imports this module, one runs it.
    from openapi_spec_validator import validate

    with client(url, "ada-token") as http:
        document = http.get("/v1/openapi.json").json()
    validate(document)
    assert document["paths"]["/v1/resources/{uri}"]["get"]["operationId"] == "readResource"
    assert document["paths"]["/v1/prompts/{name}:get"]["post"]["operationId"] == "getPrompt"
    assert "ResourceRead" in document["components"]["schemas"]
