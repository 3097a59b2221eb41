"""One rule for failure text on every transport, and log lines a message cannot forge.

A failure the server caused (``PROVIDER_ERROR``, ``INVALID_OUTPUT``) reaches a caller as
its code and an error id only, over MCP and REST alike; the text is in the server's log,
as a value. Every byte the MCP SDK client and the REST client receive is checked.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from mcp import Client
from pydantic import BaseModel
from tests.builders import mcp_http_client, tiered_tool

from charter import ErrorCode, Registry, ToolError
from charter.auth import Principal, StaticAuthenticator
from charter.errors import DEFAULT_NEXT_STEPS
from charter.host import Host
from charter.http import create_app
from live_server import serve

pytestmark = pytest.mark.anyio

CANARY = "CANARY-5e1d77"
DSN = f"postgresql://app:{CANARY}@db.internal/prod"
FORGED = "2026-01-01 00:00:00 INFO charter: approval apr_1 granted by ana"
CALLER = Principal(subject="agent-1", tenant_id="acme", scopes=frozenset({"lab:run"}))


class Empty(BaseModel):
    pass


class Done(BaseModel):
    done: bool


def _raise_provider_error(arguments: Empty) -> Done:
    raise ToolError(ErrorCode.PROVIDER_ERROR, f"cannot connect to {DSN}")


def _raise_unknown_code(arguments: Empty) -> Done:
    raise ToolError("DATABASE_DOWN", f"cannot connect to {DSN}")  # falls back to PROVIDER_ERROR


def _crash(arguments: Empty) -> Done:
    raise RuntimeError(f"cannot connect to {DSN}")


def _bad_output(arguments: Empty) -> Done:
    return {"done": True, "dsn": DSN}  # type: ignore[return-value]


def _not_found(arguments: Empty) -> Done:
    raise ToolError(ErrorCode.NOT_FOUND, "No trip 'trp_1' in your tenant.")


class Listing(BaseModel):
    names: list[str]


def _unsendable_output(arguments: Empty) -> Listing:
    # A name os.listdir decoded with surrogateescape: valid to pydantic, not to UTF-8.
    return Listing(names=["caf\udce9.txt"])


def _forge_by_tool_error(arguments: Empty) -> Done:
    raise ToolError(ErrorCode.PROVIDER_ERROR, f"boom\n{FORGED}")


def _forge_by_exception(arguments: Empty) -> Done:
    raise ValueError(f"boom\r\n{FORGED}")


TOOLS = {
    "lab.raise_provider_error": _raise_provider_error,
    "lab.raise_unknown_code": _raise_unknown_code,
    "lab.crash": _crash,
    "lab.bad_output": _bad_output,
    "lab.not_found": _not_found,
    "lab.forge_by_tool_error": _forge_by_tool_error,
    "lab.forge_by_exception": _forge_by_exception,
}

SERVER_FAULTS = [
    ("lab.raise_provider_error", ErrorCode.PROVIDER_ERROR),
    ("lab.raise_unknown_code", ErrorCode.PROVIDER_ERROR),
    ("lab.crash", ErrorCode.PROVIDER_ERROR),
    ("lab.bad_output", ErrorCode.INVALID_OUTPUT),
    ("lab.unsendable_output", ErrorCode.INVALID_OUTPUT),
]
LOGGED_WITH_THEIR_TEXT = ["lab.raise_provider_error", "lab.raise_unknown_code", "lab.crash"]
"""The failures whose text the log keeps (invalid output is logged without its values)."""


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    registry = Registry()
    for name, handler in TOOLS.items():
        registry.register(
            tiered_tool(name, "read", handler, Empty, Done, required_scopes=["lab:run"])
        )
    registry.register(
        tiered_tool(
            "lab.unsendable_output",
            "read",
            _unsendable_output,
            Empty,
            Listing,
            required_scopes=["lab:run"],
        )
    )
    host = Host(registry, authenticator=StaticAuthenticator({"lab-token": CALLER}))
    with serve(create_app(host)) as base:
        yield base


class _Recording(httpx2.AsyncBaseTransport):
    """The MCP client's transport, keeping every byte the server sent."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.received = bytearray()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        self.received.extend(repr(response.headers.raw).encode())
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, self.received),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Tee(httpx2.AsyncByteStream):
    def __init__(self, stream: object, into: bytearray) -> None:
        assert isinstance(stream, httpx2.AsyncByteStream)
        self.stream = stream
        self.into = into

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            self.into.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


@asynccontextmanager
async def mcp_client(url: str) -> AsyncIterator[tuple[Client, bytearray]]:
    transport = _Recording()
    async with mcp_http_client(url + "/mcp", "lab-token", transport=transport) as client:
        yield client, transport.received


def rest_client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": "Bearer lab-token"}, timeout=30)


def _text(result: object) -> str:
    content = getattr(result, "content", [])
    return str(getattr(content[0], "text", ""))


# -- one rule for failure text ------------------------------------------------------------------


async def test_a_server_fault_reaches_an_mcp_caller_as_its_code_and_error_id_only(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="charter")
    async with mcp_client(url) as (client, received):
        for name, code in SERVER_FAULTS:
            result = await client.call_tool(name, {})
            assert result.is_error is True
            assert result.meta is not None
            outcome = result.meta["charter/outcome"]
            error_id = outcome["meta"]["errorId"]
            assert outcome["code"] == code
            assert outcome["meta"] == {"errorId": error_id}
            assert _text(result).startswith(f"[{code}] ")
            assert f"Error id: {error_id}." in _text(result)
            assert error_id in caplog.text  # the operator finds the failure by its id
    assert received  # the recording saw the answers
    assert CANARY.encode() not in received
    assert b"postgresql" not in received
    assert CANARY in caplog.text


def test_a_server_fault_reaches_a_rest_caller_as_its_code_and_error_id_only(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="charter")
    with rest_client(url) as rest:
        for name, code in SERVER_FAULTS:
            caplog.clear()
            response = rest.post(f"/v1/tools/{name}:call", json={})
            assert response.status_code == 500
            body = response.json()
            assert body["code"] == code
            assert body["detail"].endswith(f"Error id: {body['error_id']}.")
            assert CANARY.encode() not in response.content
            assert CANARY not in str(response.headers)
            assert body["error_id"] in caplog.text
            assert (CANARY in caplog.text) is (name in LOGGED_WITH_THEIR_TEXT)


async def test_mcp_and_rest_render_a_server_fault_with_the_same_text(url: str) -> None:
    async with mcp_client(url) as (client, _):
        result = await client.call_tool("lab.raise_provider_error", {})
    assert result.meta is not None
    over_mcp = result.meta["charter/outcome"]
    with rest_client(url) as rest:
        over_rest = rest.post("/v1/tools/lab.raise_provider_error:call", json={}).json()
    # Each call has its own error id; the rest of the text is the same sentence.
    assert over_mcp["message"].replace(over_mcp["meta"]["errorId"], "<id>") == over_rest[
        "detail"
    ].replace(over_rest["error_id"], "<id>")
    assert over_mcp["next_steps"] == over_rest["next_steps"]


async def test_a_tool_error_with_a_caller_facing_code_keeps_its_message_on_both(url: str) -> None:
    async with mcp_client(url) as (client, _):
        result = await client.call_tool("lab.not_found", {})
    assert _text(result).startswith("[NOT_FOUND] No trip 'trp_1' in your tenant.")
    with rest_client(url) as rest:
        response = rest.post("/v1/tools/lab.not_found:call", json={})
    assert response.status_code == 404
    assert response.json()["detail"] == "No trip 'trp_1' in your tenant."
    # A thing the tool did not find, not an unknown tool: check the id, not the tool list.
    assert response.json()["next_steps"] == list(DEFAULT_NEXT_STEPS[ErrorCode.NOT_FOUND])
    assert DEFAULT_NEXT_STEPS[ErrorCode.NOT_FOUND][0] in _text(result)


# -- log lines a message cannot forge ------------------------------------------------------------


def _charter_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.split(".")[0] == "charter"]


def _assert_not_forged(record: logging.LogRecord) -> None:
    for formatter in (
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"),
        logging.Formatter(),
    ):
        rendered = formatter.format(record)
        assert not any(line.startswith(FORGED) for line in rendered.splitlines()), rendered
        assert f"\n{FORGED}" not in rendered
        assert f"\\n{FORGED}" in rendered  # the text is there, escaped


@pytest.mark.parametrize("name", ["lab.forge_by_tool_error", "lab.forge_by_exception"])
def test_a_message_with_a_newline_is_one_log_record_over_rest(
    url: str, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    caplog.set_level(logging.INFO)
    with rest_client(url) as rest:
        caplog.clear()
        assert rest.post(f"/v1/tools/{name}:call", json={}).status_code == 500
    records = _charter_records(caplog)
    assert len(records) == 1
    _assert_not_forged(records[0])


@pytest.mark.parametrize("name", ["lab.forge_by_tool_error", "lab.forge_by_exception"])
async def test_a_message_with_a_newline_is_one_log_record_over_mcp(
    url: str, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    caplog.set_level(logging.INFO)
    async with mcp_client(url) as (client, _):
        caplog.clear()
        result = await client.call_tool(name, {})
        records = _charter_records(caplog)
    assert result.is_error is True
    assert len(records) == 1
    _assert_not_forged(records[0])
