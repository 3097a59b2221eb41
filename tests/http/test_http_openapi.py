"""``/v1/openapi.json``: a valid OpenAPI 3.1 document built from the tools' own schemas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from http_support import Live, serve_standard_app
from hypothesis import HealthCheck, Phase, given, settings


def document(live: Live, token: str | None = None) -> dict[str, Any]:
    with live.client(token) as client:
        response = client.get("/v1/openapi.json")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize(
    "token", [None, "agent-token", "approver-token", "admin-token", "lab-token"]
)
def test_the_document_validates_for_every_kind_of_caller(live: Live, token: str | None) -> None:
    # Imported here, as schemathesis below: every pytest worker imports this module, one runs it.
    from openapi_spec_validator import validate

    validate(document(live, token))


def test_the_document_lists_one_operation_per_tool_the_caller_may_call(live: Live) -> None:
    anonymous = document(live)
    agent = document(live, "agent-token")
    calls = sorted(p for p in agent["paths"] if p.endswith(":call"))
    assert calls == [
        "/v1/tools/bookings.refund:call",
        "/v1/tools/catalog.ping:call",
        "/v1/tools/trips.cancel:call",
        "/v1/tools/trips.rename:call",
        "/v1/tools/trips.search:call",
        "/v1/tools/trips.transfer:call",
    ]
    assert [p for p in anonymous["paths"] if p.endswith(":call")] == ["/v1/tools/catalog.ping:call"]
    for fixed in (
        "/v1/tools",
        "/v1/tools/{name}",
        "/v1/actions/{request_id}",
        "/v1/approvals",
        "/v1/approvals/{approval_id}",
        "/v1/approvals/{approval_id}:grant",
        "/v1/approvals/{approval_id}:deny",
        "/v1/audit",
        "/healthz",
        "/readyz",
        "/v1/openapi.json",
    ):
        assert fixed in anonymous["paths"]
    operation_ids = [op["operationId"] for item in agent["paths"].values() for op in item.values()]
    assert len(operation_ids) == len(set(operation_ids))


def test_a_tool_operation_carries_the_tools_own_schemas(live: Live) -> None:
    spec = document(live, "agent-token")
    schemas = spec["components"]["schemas"]
    operation = spec["paths"]["/v1/tools/trips.search:call"]["post"]
    request = operation["requestBody"]["content"]["application/json"]["schema"]
    assert request == {"$ref": "#/components/schemas/trips.search.Request"}
    tool = live.host.registry.get("trips.search")
    assert tool is not None
    own = tool.tool.input_schema
    body = schemas["trips.search.Request"]
    assert body["properties"]["query"] == own["properties"]["query"]
    assert "$schema" not in body and "$defs" not in body
    assert set(body["properties"]["_charter"]["properties"]) == {"requestId", "reasonCode"}
    # The output's $defs became components; the references follow them.
    output = schemas["trips.search.Output"]
    assert output["properties"]["trips"]["items"] == {
        "$ref": "#/components/schemas/trips.search.Output.Trip"
    }
    assert schemas["trips.search.Output.Trip"]["properties"]["destination"] == {
        "$ref": "#/components/schemas/trips.search.Output.Place"
    }
    result = schemas["trips.search.Result"]
    assert result["properties"]["output"] == {"$ref": "#/components/schemas/trips.search.Output"}
    assert set(operation["responses"]) == {
        "200",
        "202",
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "415",
        "422",
        "429",
        "500",
        "503",
        "504",
    }
    assert operation["x-charter"]["tier"] == "read"
    assert operation["x-charter"]["requiredScopes"] == ["trips:read"]


def test_only_the_headers_a_tool_accepts_are_documented(live: Live) -> None:
    paths = document(live, "agent-token")["paths"]

    def headers(tool: str) -> list[str]:
        params = paths[f"/v1/tools/{tool}:call"]["post"]["parameters"]
        return [p["$ref"].rsplit("/", 1)[1] for p in params]

    assert headers("trips.search") == ["IdempotencyKey"]
    assert headers("trips.cancel") == ["IdempotencyKey", "CharterConfirm"]
    assert headers("bookings.refund") == ["IdempotencyKey", "CharterConfirm", "CharterApproval"]


def test_live_answers_match_their_documented_schemas(live: Live, agent: httpx.Client) -> None:
    spec = document(live, "agent-token")
    components = spec["components"]["schemas"]

    def check(schema_name: str, instance: object) -> None:
        resolver = {"$ref": f"#/components/schemas/{schema_name}", "components": spec["components"]}
        jsonschema.Draft202012Validator(resolver).validate(instance)

    check("ToolList", agent.get("/v1/tools").json())
    check(
        "trips.search.Result", agent.post("/v1/tools/trips.search:call", json={"query": "x"}).json()
    )
    check("Problem", agent.post("/v1/tools/trips.search:call", json={}).json())
    accepted = agent.post(
        "/v1/tools/trips.cancel:call",
        json={"trip_id": "trp_doc"},
        headers={"Idempotency-Key": "9a0c4d0e-55a4-4c4e-9b0b-3c1f7f6f2a10"},
    )
    check("Accepted", accepted.json())
    assert "Problem" in components


# -- schemathesis -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Live]:
    """Its own server: the fuzzer leaves approvals and ledger rows behind."""
    yield from serve_standard_app(mcp=False)


@pytest.mark.slow
@pytest.mark.parametrize("token", ["agent-token"])
def test_schemathesis_finds_no_server_errors_and_no_schema_violations(
    fuzzed: Live, token: str
) -> None:
    import schemathesis
    from schemathesis import checks as generic_checks
    from schemathesis.core.failures import FailureGroup
    from schemathesis.core.result import Ok
    from schemathesis.generation import GenerationMode
    from schemathesis.specs.openapi import checks as openapi_checks

    checks = [
        generic_checks.not_a_server_error,
        openapi_checks.status_code_conformance,
        openapi_checks.content_type_conformance,
        openapi_checks.response_headers_conformance,
        openapi_checks.response_schema_conformance,
        openapi_checks.negative_data_rejection,
        # Not positive_data_acceptance: a schema-valid call may still be refused for its
        # state (a write without a request id, or a reused Idempotency-Key -> 422).
    ]
    headers = {"Authorization": f"Bearer {token}"}
    schema = schemathesis.openapi.from_url(fuzzed.url + "/v1/openapi.json", headers=headers)
    failures: list[str] = []
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # else the schema has an invalid operation
        operations.append(result.ok())
    assert len(operations) > 10
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=4,
                deadline=None,
                derandomize=True,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def exchange(case: Any) -> None:
                case.call_and_validate(base_url=fuzzed.url, headers=headers, checks=checks)

            try:
                exchange()
            except FailureGroup as group:
                failures.append(f"{operation.label} ({mode.value}): {group}")
            except Exception as exc:  # hypothesis: no example left to try for this mode
                if "Unable to satisfy assumptions" not in str(exc):
                    raise
    assert not failures, "\n\n".join(failures)
