"""Failures as RFC 9457 problems: one status per ``ErrorCode``, headers, and nothing leaked."""

from __future__ import annotations

import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from http_support import CANARY, PROBLEM, Live

from charter import ErrorCode
from charter.http._problem import STATUS_BY_CODE, STATUS_BY_REASON, status_for

EXPECTED_STATUS = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.INVALID_INPUT: 422,
    ErrorCode.INVALID_OUTPUT: 500,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.AUTHORIZATION_DENIED: 403,
    ErrorCode.CONFIRMATION_REQUIRED: 403,
    ErrorCode.APPROVAL_REQUIRED: 403,
    ErrorCode.ACTION_POLICY_REQUIRED: 403,
    ErrorCode.IDEMPOTENCY_CONFLICT: 422,
    ErrorCode.REQUEST_IN_PROGRESS: 409,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.CANCELLED: 503,
    ErrorCode.MISSING_SERVICE: 503,
    ErrorCode.PROVIDER_ERROR: 500,
    ErrorCode.PROVIDER_UNAVAILABLE: 503,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.UPSTREAM_ERROR: 502,
}


def test_every_error_code_has_a_status() -> None:
    missing = [code for code in ErrorCode if code not in STATUS_BY_CODE]
    assert not missing, f"add these codes to STATUS_BY_CODE: {missing}"
    assert {code: STATUS_BY_CODE[code][0] for code in ErrorCode} == EXPECTED_STATUS


def test_reasons_that_override_the_status_belong_to_invalid_input() -> None:
    assert status_for(ErrorCode.INVALID_INPUT, "invalid_json") == (400, "Malformed request")
    assert status_for(ErrorCode.INVALID_INPUT, "input_too_large")[0] == 413
    # A reason only refines INVALID_INPUT; other codes keep their status.
    assert status_for(ErrorCode.AUTHORIZATION_DENIED, "invalid_json")[0] == 403
    assert {status for status, _ in STATUS_BY_REASON.values()} == {400, 413, 415}


@pytest.mark.parametrize("code", list(ErrorCode))
def test_a_handler_error_is_rendered_with_the_status_of_its_code(
    lab_client: httpx.Client, code: ErrorCode
) -> None:
    response = lab_client.post("/v1/tools/lab.fail:call", json={"code": code.value})
    assert response.status_code == EXPECTED_STATUS[code]
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["type"] == f"urn:charter:error:{code.value}"
    assert body["status"] == response.status_code
    assert body["code"] == code
    assert body["title"] and body["detail"] and body["next_steps"]
    assert isinstance(body["retryable"], bool)
    if response.status_code == 500:
        # A 500 says only that it failed and under which id; the message stays in the log.
        assert CANARY not in response.text
        assert body["error_id"].startswith("err_")
        assert set(body) == {
            "type",
            "title",
            "status",
            "detail",
            "code",
            "next_steps",
            "retryable",
            "error_id",
        }
    else:
        assert "error_id" not in body
    if code is ErrorCode.UNAUTHENTICATED:
        assert response.headers["www-authenticate"] == "Bearer"
    if code in (ErrorCode.REQUEST_IN_PROGRESS, ErrorCode.PROVIDER_UNAVAILABLE):
        assert response.headers["retry-after"] == "1"
    if code is ErrorCode.TIMEOUT:
        assert body["retryable"] is True


def test_an_unexpected_exception_is_a_500_with_only_an_error_id(
    lab_client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    response = lab_client.post("/v1/tools/lab.crash:call", json={})
    assert response.status_code == 500
    body = response.json()
    assert body["code"] == ErrorCode.PROVIDER_ERROR
    assert body["detail"] == f"The tool failed inside the server. Error id: {body['error_id']}."
    assert CANARY not in response.text
    assert "postgresql" not in response.text


def test_output_that_breaks_the_schema_is_a_500_and_never_reaches_the_caller(
    lab_client: httpx.Client,
) -> None:
    response = lab_client.post("/v1/tools/lab.bad_output:call", json={})
    assert response.status_code == 500
    assert response.json()["code"] == ErrorCode.INVALID_OUTPUT
    assert response.json()["error_id"].startswith("err_")
    assert CANARY not in response.text
    assert "password_hash" not in response.text


def test_a_tool_that_times_out_is_504_and_retryable(lab_client: httpx.Client) -> None:
    response = lab_client.post("/v1/tools/lab.timeout:call", json={"key": "t"})
    assert response.status_code == 504
    assert response.json()["code"] == ErrorCode.TIMEOUT
    assert response.json()["retryable"] is True


def test_a_duplicate_while_the_first_still_runs_is_409_with_retry_after(live: Live) -> None:
    gate = live.lab.gate("busy")
    request_id = str(uuid.uuid4())
    call: dict[str, Any] = {"json": {"key": "busy"}, "headers": {"Idempotency-Key": request_id}}
    with (
        live.client("lab-token") as first_client,
        live.client("lab-token") as second_client,
        ThreadPoolExecutor(1) as pool,
    ):
        first = pool.submit(first_client.post, "/v1/tools/lab.slow:call", **call)
        assert gate.started.wait(5)
        try:
            duplicate = second_client.post("/v1/tools/lab.slow:call", **call)
        finally:
            gate.release.set()
        assert duplicate.status_code == 409
        assert duplicate.headers["retry-after"] == "1"
        assert duplicate.json()["code"] == ErrorCode.REQUEST_IN_PROGRESS
        assert duplicate.json()["retryable"] is True
        assert first.result(10).status_code == 200
        replay = second_client.post("/v1/tools/lab.slow:call", **call)
    assert replay.json() == {"output": {"key": "busy", "done": True}, "replayed": True}
    assert live.lab.runs["slow:busy"] == 1


def test_a_client_that_goes_away_cancels_the_call(live: Live) -> None:
    gate = live.lab.gate("gone")
    body = b'{"key": "gone"}'
    address = live.url.removeprefix("http://").split(":")
    with socket.create_connection((address[0], int(address[1])), timeout=5) as raw:
        raw.sendall(
            b"POST /v1/tools/lab.hang:call HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer lab-token\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        assert gate.started.wait(5)
    # The connection is closed while the handler waits: the handler sees ctx.cancel.
    assert gate.cancelled.wait(5)


def test_unknown_routes_and_methods_are_problems_too(anonymous: httpx.Client) -> None:
    missing = anonymous.get("/v1/nothing")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == PROBLEM
    assert missing.json()["reason"] == "route_not_found"
    wrong = anonymous.delete("/v1/tools")
    assert wrong.status_code == 405
    assert wrong.headers["content-type"] == PROBLEM
    assert wrong.headers["allow"] in ("GET, HEAD", "HEAD, GET")
