"""Hostile bodies: too large (declared or streamed), too deep, duplicate keys, NaN, not JSON."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from http_support import Live, serve_standard_app

from charter import ErrorCode

RENAME = "/v1/tools/trips.rename:call"
JSON = {"Content-Type": "application/json"}
"""A raw body is sent as JSON, as the call route requires (415 otherwise)."""


@pytest.fixture(scope="module")
def small() -> Iterator[Live]:
    """An app that accepts at most 1000 bytes of body."""
    yield from serve_standard_app(mcp=False, max_body_bytes=1000)


def test_a_declared_body_over_the_limit_is_413_before_it_is_read(small: Live) -> None:
    request_id = str(uuid.uuid4())
    with small.client("agent-token") as client:
        response = client.post(
            RENAME,
            content=b'{"trip_id": "trp_big", "name": "' + b"x" * 1000 + b'"}',
            headers={"Idempotency-Key": request_id, "Content-Type": "application/json"},
        )
        assert response.status_code == 413
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == ErrorCode.INVALID_INPUT
        assert response.json()["reason"] == "input_too_large"
        # Nothing ran and nothing was recorded: the request id is still free.
        assert client.get(f"/v1/actions/{request_id}").status_code == 404
    assert small.lab.runs["rename:trp_big"] == 0


def test_a_streamed_body_is_cut_off_at_the_limit(small: Live) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"trip_id": "trp_stream", "name": "'
        for _ in range(20):
            yield b"x" * 200
        yield b'"}'

    with small.client("agent-token") as client:
        response = client.post(
            RENAME, content=chunks(), headers={"Idempotency-Key": str(uuid.uuid4()), **JSON}
        )
    assert response.status_code == 413
    assert response.json()["reason"] == "input_too_large"
    assert small.lab.runs["rename:trp_stream"] == 0


def test_a_body_at_the_limit_is_accepted(small: Live) -> None:
    prefix = b'{"trip_id": "trp_fits", "name": "'
    body = prefix + b"x" * (1000 - len(prefix) - 2) + b'"}'
    assert len(body) == 1000
    with small.client("agent-token") as client:
        response = client.post(
            RENAME, content=body, headers={"Idempotency-Key": str(uuid.uuid4()), **JSON}
        )
    # It reaches the tool, whose schema caps the name at 80 characters.
    assert response.status_code == 422
    assert response.json()["reason"] == "validation_failed"


def test_the_default_limit_is_the_hosts_max_bytes(live: Live, agent: httpx.Client) -> None:
    limit = live.host.limits.max_bytes
    response = agent.post(
        RENAME,
        content=b" " * (limit + 1),
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert response.status_code == 413


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b'{"query": "a",}', 400, "invalid_json"),
        (b'{"query": ', 400, "invalid_json"),
        (b'{"query": "a", "query": "b"}', 400, "duplicate_key"),
        (b'{"query": "a", "limit": NaN}', 400, "non_finite_number"),
        (b'{"query": "a", "limit": Infinity}', 400, "non_finite_number"),
        (b'{"query": "a", "limit": 1e400}', 400, "non_finite_number"),
        (b'{"query": "\xff"}', 400, "invalid_utf8"),
        (b'{"query": "a", "x": ' + b"[" * 100 + b"]" * 100 + b"}", 422, "input_too_deep"),
        (b"[" * 100_000 + b"]" * 100_000, 422, "input_too_deep"),
        (b'["query"]', 422, "not_an_object"),
        (b'{"query": "a", "limit": ' + b"9" * 5000 + b"}", 413, "input_too_large"),
    ],
)
def test_hostile_json_is_a_clean_problem(
    agent: httpx.Client, body: bytes, status: int, reason: str
) -> None:
    response = agent.post("/v1/tools/trips.search:call", content=body, headers=JSON)
    assert response.status_code == status
    problem = response.json()
    assert problem["code"] == ErrorCode.INVALID_INPUT
    assert problem["reason"] == reason
    assert problem["status"] == status
