"""Lines on stdio are checked as HTTP bodies are, before the SDK parses them.

``serve_stdio`` in a subprocess (``mcp_support.py``), raw lines written to its stdin: a
line that repeats a key, breaks the payload limits or names an invalid id is answered with
a JSON-RPC ``-32600`` and runs nothing; a line that is not JSON is answered ``-32700``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SUPPORT = Path(__file__).with_name("mcp_support.py")
WAIT_SECONDS = 60  # a bound, not a speed: a loaded CI machine starts Python slowly


class Stdio:
    """A ``serve_stdio`` subprocess spoken to one raw line at a time."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], WAIT_SECONDS)
        assert ready, "no answer from the stdio server"
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def call(self, request_id: int, name: str, arguments: str) -> str:
        params = '{"name":"' + name + '","arguments":' + arguments + "}"
        head = '{"jsonrpc":"2.0","id":' + str(request_id) + ',"method":"tools/call","params":'
        return head + params + "}"


@pytest.fixture(scope="module")
def stdio() -> Iterator[Stdio]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(folder) for folder in Path(__file__).parents[1:3]),
    }
    process = subprocess.Popen(
        [sys.executable, str(SUPPORT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,  # unbuffered: select() sees every answer not yet read
        env=env,
    )
    served = Stdio(process)
    try:
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        }
        served.send(json.dumps(initialize))
        assert served.answer()["id"] == 0
        served.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield served
    finally:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        process.wait(WAIT_SECONDS)
        process.stdout.close()


def test_a_line_that_repeats_a_key_is_refused_and_runs_nothing(stdio: Stdio) -> None:
    # The SDK's parser would run the last name (echo), or echo the last text.
    stdio.send(
        '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        '"params":{"name":"whoami","name":"echo","arguments":{"text":"a"}}}'
    )
    named = stdio.answer()
    stdio.send(stdio.call(2, "echo", '{"text":"a","text":"b"}'))
    argued = stdio.answer()
    stdio.send(stdio.call(3, "echo", '{"text":"c"}'))
    fine = stdio.answer()
    for request_id, refused in ((1, named), (2, argued)):
        assert "result" not in refused
        assert refused["id"] == request_id
        assert refused["error"]["code"] == -32600
        assert refused["error"]["data"] == {"reason": "duplicate_key"}
    assert fine["id"] == 3 and fine["result"]["structuredContent"]["text"] == "c"


def test_a_line_that_is_not_json_is_answered_with_a_parse_error(stdio: Stdio) -> None:
    stdio.send('{"jsonrpc":"2.0","id":4,')
    broken = stdio.answer()
    stdio.send(stdio.call(5, "echo", '{"text":"still here"}'))
    fine = stdio.answer()
    assert broken == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    assert fine["id"] == 5 and "result" in fine


@pytest.mark.parametrize("request_id", ["null", "1.5", "true", "[1]"])
def test_a_request_with_an_invalid_id_is_refused(stdio: Stdio, request_id: str) -> None:
    stdio.send(stdio.call(0, "echo", '{"text":"x"}').replace('"id":0', '"id":' + request_id))
    refused = stdio.answer()
    assert refused["id"] is None and refused["error"]["code"] == -32600


def test_a_line_past_the_parsers_limits_is_refused_with_its_reason(stdio: Stdio) -> None:
    stdio.send(stdio.call(6, "echo", '{"text":' + "[" * 1000 + "]" * 1000 + "}"))
    deep = stdio.answer()
    stdio.send(stdio.call(7, "echo", '{"text":' + "9" * 4301 + "}"))
    large = stdio.answer()
    assert (deep["id"], deep["error"]["data"]) == (None, {"reason": "input_too_deep"})
    assert (large["id"], large["error"]["data"]) == (None, {"reason": "input_too_large"})


STDIN_READER = """
import sys, anyio
from charter import Registry, tool
from charter.auth import Principal
from charter.host import Host
from charter.mcp import serve_stdio

@tool(tier="read", name="stdin.read")
def read_stdin() -> str:
    '''Read what is left on stdin.'''
    return sys.stdin.buffer.read().decode()

registry = Registry()
registry.register(read_stdin)
principal = Principal(subject="alice", tenant_id="acme", scopes=frozenset())
anyio.run(serve_stdio, Host(registry), principal)
"""


def test_a_handler_reading_stdin_gets_eof_not_the_next_protocol_line() -> None:
    # fd 0 points at the null device while the server reads the protocol from its copy.
    process = subprocess.Popen(
        [sys.executable, "-c", STDIN_READER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,  # unbuffered: select() sees every answer not yet read
    )
    served = Stdio(process)
    try:
        served.send(
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
            '"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
        )
        assert served.answer()["id"] == 0
        served.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        served.send(served.call(1, "stdin.read", "{}"))
        served.send(served.call(2, "stdin.read", "{}"))
        first, second = served.answer(), served.answer()
        for request_id, answer in ((1, first), (2, second)):
            assert answer["id"] == request_id
            assert answer["result"]["structuredContent"] == {"result": ""}
    finally:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        process.wait(WAIT_SECONDS)
        process.stdout.close()
