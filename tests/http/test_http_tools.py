"""Discovery and calls over HTTP: ``/v1/tools``, ``/v1/tools/{name}``, ``/v1/tools/{name}:call``."""

from __future__ import annotations

import httpx
import pytest
from http_support import PROBLEM, Live, assert_challenged
from tests.builders import request_id as key

from charter import ErrorCode
from charter.manifest import CONTRACT_VERSION

RENAME = "/v1/tools/trips.rename:call"
"""The ledgered write most of these tests call."""


def test_the_tool_list_is_the_manifest_the_caller_may_call(
    agent: httpx.Client, anonymous: httpx.Client, approver: httpx.Client
) -> None:
    names = [t["name"] for t in agent.get("/v1/tools").json()["tools"]]
    assert names == [
        "catalog.ping",
        "trips.search",
        "trips.rename",
        "trips.cancel",
        "bookings.refund",
        "trips.transfer",
    ]
    body = anonymous.get("/v1/tools").json()
    assert body["contractVersion"] == CONTRACT_VERSION
    assert [t["name"] for t in body["tools"]] == ["catalog.ping"]
    assert [t["name"] for t in approver.get("/v1/tools").json()["tools"]] == [
        "catalog.ping",
        "trips.search",
    ]


def test_one_tool_is_found_by_name_or_alias_and_a_hidden_one_is_unknown(
    agent: httpx.Client, anonymous: httpx.Client
) -> None:
    entry = agent.get("/v1/tools/trips.search").json()
    assert entry["inputSchema"]["properties"]["query"]["maxLength"] == 100
    assert agent.get("/v1/tools/trips.find").json()["name"] == "trips.search"
    hidden = anonymous.get("/v1/tools/trips.search")
    assert hidden.status_code == 404
    assert hidden.headers["content-type"] == PROBLEM
    assert hidden.json()["code"] == ErrorCode.NOT_FOUND
    unknown = anonymous.get("/v1/tools/trips.nothing")
    assert hidden.text == unknown.text.replace("trips.nothing", "trips.search")
    typo = agent.get("/v1/tools/trips.serch").json()
    assert typo["meta"]["didYouMean"] == "trips.search"


def test_a_read_call_answers_200_with_the_validated_output(agent: httpx.Client) -> None:
    response = agent.post("/v1/tools/trips.search:call", json={"query": "lisbon", "limit": 1})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "output": {
            "trips": [
                {
                    "trip_id": "trp_1",
                    "name": "Lisbon",
                    "destination": {"city": "Lisbon", "country": "PT"},
                }
            ]
        },
        "replayed": False,
    }
    assert "idempotent-replayed" not in response.headers


def test_an_alias_and_an_empty_body_both_work(agent: httpx.Client, anonymous: httpx.Client) -> None:
    assert agent.post("/v1/tools/trips.find:call", json={"query": "x"}).status_code == 200
    ping = anonymous.post("/v1/tools/catalog.ping:call")
    assert ping.status_code == 200
    assert ping.json()["output"] == {"pong": True}


def test_an_anonymous_call_to_an_identity_tool_is_401_with_a_bearer_challenge(
    anonymous: httpx.Client,
) -> None:
    response = anonymous.post("/v1/tools/trips.search:call", json={"query": "x"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["code"] == ErrorCode.UNAUTHENTICATED


def test_bad_credentials_are_401_invalid_token_on_every_authenticated_route(live: Live) -> None:
    for headers in (
        {"Authorization": "Bearer nope"},
        {"X-API-Key": "nope"},
        {"Authorization": "Bearer"},
    ):
        with live.client(headers=headers) as client:
            routes = [
                ("GET", "/v1/tools"),
                ("POST", "/v1/tools/catalog.ping:call"),
                ("GET", "/v1/approvals"),
                ("GET", "/v1/openapi.json"),
            ]
            for response in assert_challenged(client, routes, 'Bearer error="invalid_token"'):
                assert response.json()["reason"] == "invalid_token", headers


def test_an_api_key_header_authenticates_like_a_bearer_token(live: Live) -> None:
    with live.client(headers={"X-API-Key": "agent-token"}) as client:
        assert client.post("/v1/tools/trips.search:call", json={"query": "x"}).status_code == 200


def test_missing_scopes_are_403_naming_them_in_the_challenge(approver: httpx.Client) -> None:
    response = approver.post(RENAME, json={"trip_id": "trp_1", "name": "x"})
    assert response.status_code == 403
    assert (
        response.headers["www-authenticate"]
        == 'Bearer error="insufficient_scope", scope="trips:write"'
    )
    body = response.json()
    assert body["code"] == ErrorCode.AUTHORIZATION_DENIED
    assert body["reason"] == "insufficient_scope"
    assert body["meta"]["missing"] == ["trips:write"]


def test_invalid_input_is_422_with_issues_that_do_not_echo_the_input(
    agent: httpx.Client,
) -> None:
    response = agent.post("/v1/tools/trips.search:call", json={"query": "q" * 101 + "SECRET"})
    assert response.status_code == 422
    body = response.json()
    assert body["type"] == "urn:charter:error:INVALID_INPUT"
    assert body["title"] == "Invalid input"
    assert body["status"] == 422
    assert body["code"] == ErrorCode.INVALID_INPUT
    assert body["reason"] == "validation_failed"
    assert body["retryable"] is False
    assert body["next_steps"]
    assert body["meta"]["issues"][0]["loc"] == ["query"]
    assert "SECRET" not in response.text


def test_a_write_without_a_request_id_is_422_and_runs_nothing(
    agent: httpx.Client, live: Live
) -> None:
    response = agent.post(RENAME, json={"trip_id": "trp_norid", "name": "x"})
    assert response.status_code == 422
    assert response.json()["reason"] == "request_id_required"
    assert live.lab.runs["rename:trp_norid"] == 0


def rename_with_key(
    agent: httpx.Client, arguments: dict[str, str], request_id: str, spelling: str
) -> httpx.Response:
    """Call RENAME with the key in a header, a quoted upper-case header or the body control."""
    if spelling == "body control":
        return agent.post(RENAME, json={**arguments, "_charter": {"requestId": request_id}})
    header = f'"{request_id.upper()}"' if spelling == "quoted header" else request_id
    return agent.post(RENAME, json=arguments, headers={"Idempotency-Key": header})


@pytest.mark.parametrize(
    ("trip_id", "first", "again"),
    [
        pytest.param("trp_replay", "header", "header", id="the same header"),
        pytest.param("trp_quoted", "quoted header", "body control", id="quoted header, body"),
    ],
)
def test_the_same_idempotency_key_replays_without_running_the_handler_again(
    agent: httpx.Client, live: Live, trip_id: str, first: str, again: str
) -> None:
    request_id = key()
    arguments = {"trip_id": trip_id, "name": "Porto"}
    answered = rename_with_key(agent, arguments, request_id, first)
    replayed = rename_with_key(agent, arguments, request_id, again)
    assert answered.status_code == 200
    assert answered.json() == {"output": arguments, "replayed": False}
    assert replayed.status_code == 200
    assert replayed.json() == {"output": arguments, "replayed": True}
    assert replayed.headers["idempotent-replayed"] == "true"
    assert live.lab.runs[f"rename:{trip_id}"] == 1


def test_the_same_key_with_other_arguments_is_422_idempotency_conflict(
    agent: httpx.Client,
) -> None:
    request_id = key()
    headers = {"Idempotency-Key": request_id}
    ok = agent.post(RENAME, json={"trip_id": "trp_c", "name": "A"}, headers=headers)
    assert ok.status_code == 200
    conflict = agent.post(RENAME, json={"trip_id": "trp_c", "name": "B"}, headers=headers)
    assert conflict.status_code == 422
    assert conflict.json()["code"] == ErrorCode.IDEMPOTENCY_CONFLICT
    assert conflict.json()["reason"] == "idempotency_key_reused"


def test_a_header_and_a_body_control_that_disagree_are_400(agent: httpx.Client) -> None:
    response = agent.post(
        RENAME,
        json={"trip_id": "trp_d", "name": "A", "_charter": {"requestId": key()}},
        headers={"Idempotency-Key": key()},
    )
    assert response.status_code == 400
    assert response.json()["code"] == ErrorCode.INVALID_INPUT
    assert response.json()["reason"] == "controls_conflict"


def test_malformed_control_headers_are_400_naming_the_header(agent: httpx.Client) -> None:
    cases = {
        "Idempotency-Key": "not-a-uuid",
        "Charter-Confirm": "yes",
        "Charter-Approval": "a" * 201,
    }
    for header, value in cases.items():
        response = agent.post(
            "/v1/tools/trips.cancel:call", json={"trip_id": "trp_h"}, headers={header: value}
        )
        assert response.status_code == 400, header
        assert response.json()["reason"] == "invalid_header"
        assert response.json()["meta"] == {"header": header}


def test_a_sensitive_call_is_202_until_confirmed_then_200(agent: httpx.Client, live: Live) -> None:
    headers = {"Idempotency-Key": key()}
    arguments = {"trip_id": "trp_conf"}
    waiting = agent.post("/v1/tools/trips.cancel:call", json=arguments, headers=headers)
    assert waiting.status_code == 202
    body = waiting.json()
    assert body["kind"] == "interaction-required"
    assert body["interaction"]["metadata"]["code"] == ErrorCode.CONFIRMATION_REQUIRED
    assert body["approvalId"] is None
    assert body["requestId"] == headers["Idempotency-Key"]
    assert live.lab.runs["cancel:trp_conf"] == 0
    done = agent.post(
        "/v1/tools/trips.cancel:call",
        json=arguments,
        headers={**headers, "Charter-Confirm": "true"},
    )
    assert done.status_code == 200
    assert done.json()["output"] == {"trip_id": "trp_conf", "cancelled": True}
    assert live.lab.runs["cancel:trp_conf"] == 1


def test_charter_confirm_false_is_the_same_as_not_confirming(agent: httpx.Client) -> None:
    response = agent.post(
        "/v1/tools/trips.cancel:call",
        json={"trip_id": "trp_f"},
        headers={"Idempotency-Key": key(), "Charter-Confirm": "false"},
    )
    assert response.status_code == 202


def test_a_deferred_call_is_202_with_the_location_of_its_status(lab_client: httpx.Client) -> None:
    request_id = key()
    response = lab_client.post(
        "/v1/tools/lab.defer:call", json={"key": "d", "_charter": {"requestId": request_id}}
    )
    assert response.status_code == 202
    assert response.json()["kind"] == "deferred"
    assert response.json()["requestId"] == request_id
    assert response.headers["location"] == f"/v1/actions/{request_id}"
    status = lab_client.get(response.headers["location"])
    assert status.status_code == 200
    assert status.json()["status"] == "deferred"
