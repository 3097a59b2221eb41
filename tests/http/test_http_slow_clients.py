"""Slow clients: no body is waited for before authentication, and no body is waited for forever.

Raw sockets against uvicorn on 127.0.0.1, so a test can send half a request and hold it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from http_support import Lab, Live, build_host, serve, serve_standard_app

from charter import ErrorCode
from charter.http import create_app
from live_server import raw_connection, read_until_closed

BODY_TIMEOUT = 0.5


@pytest.fixture(scope="module")
def impatient() -> Iterator[Live]:
    """The standard app, waiting at most half a second for a body."""
    yield from serve_standard_app(mcp=False, body_timeout=BODY_TIMEOUT)


def head(path: str, *, length: int = 1000, token: str | None = None) -> bytes:
    """A POST's head promising ``length`` bytes of body, and the first byte of that body."""
    lines = [
        f"POST {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {length}",
    ]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n{").encode()


def answer(raw: bytes) -> tuple[int, dict[str, str], object]:
    """The status, headers (lower-case names) and JSON body of one HTTP/1.1 response."""
    header_block, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = header_block.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, json.loads(body) if body else None


@pytest.mark.parametrize(
    ("path", "token", "status", "code"),
    [
        # No credentials, a tool that needs them: the host's own refusal, body unread.
        ("/v1/tools/trips.rename:call", None, 401, ErrorCode.UNAUTHENTICATED),
        # No credentials, no such tool: the same 404 the host gives with a body.
        ("/v1/tools/trips.nope:call", None, 404, ErrorCode.NOT_FOUND),
        # A bad key on a tool call and on an approval decision.
        ("/v1/tools/catalog.ping:call", "wrong-token", 401, ErrorCode.UNAUTHENTICATED),
        ("/v1/approvals/apr_1:grant", "wrong-token", 401, ErrorCode.UNAUTHENTICATED),
        # No key on an approval decision.
        ("/v1/approvals/apr_1:deny", None, 401, ErrorCode.UNAUTHENTICATED),
    ],
)
def test_an_unauthenticated_post_is_answered_without_waiting_for_its_body(
    live: Live, path: str, token: str | None, status: int, code: ErrorCode
) -> None:
    with raw_connection(live.url, head(path, token=token)) as sock:
        received = read_until_closed(sock)
    got, headers, problem = answer(received)
    assert (got, headers["connection"]) == (status, "close")
    assert isinstance(problem, dict) and problem["code"] == code


def test_a_body_that_does_not_arrive_in_time_is_408_and_the_connection_closes(
    impatient: Live,
) -> None:
    with raw_connection(
        impatient.url, head("/v1/tools/trips.search:call", token="agent-token")
    ) as sock:
        received = read_until_closed(sock)
    status, headers, problem = answer(received)
    assert (status, headers["connection"]) == (408, "close")
    assert isinstance(problem, dict)
    assert (problem["code"], problem["reason"]) == (ErrorCode.TIMEOUT, "body_timeout")
    assert problem["retryable"] is True
    # The server is none the worse for it.
    assert httpx.get(impatient.url + "/healthz", timeout=10).status_code == 200


def test_an_mcp_body_that_does_not_arrive_in_time_is_408_too() -> None:
    with serve(create_app(build_host(Lab()), body_timeout=BODY_TIMEOUT)) as url:
        with raw_connection(url, head("/mcp", token="agent-token")) as sock:
            received = read_until_closed(sock)
    status, headers, problem = answer(received)
    assert (status, headers["connection"]) == (408, "close")
    assert isinstance(problem, dict) and problem["reason"] == "body_timeout"


def test_an_anonymous_call_to_a_public_tool_reads_its_body(anonymous: httpx.Client) -> None:
    response = anonymous.post("/v1/tools/catalog.ping:call", json={})
    assert response.status_code == 200


def test_a_body_within_the_timeout_keeps_the_connection_reusable(impatient: Live) -> None:
    with impatient.client("agent-token") as client:
        first = client.post("/v1/tools/trips.search:call", json={"query": "lisbon"})
        second = client.post("/v1/tools/trips.search:call", json={"query": "porto"})
    assert (first.status_code, second.status_code) == (200, 200)
    assert "close" not in first.headers.get("connection", "")


def test_a_body_timeout_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="body_timeout"):
        create_app(build_host(Lab()), body_timeout=0)
