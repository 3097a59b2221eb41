"""charter's layers leave nothing of their own in the garbage an SSE answer leaves behind.

The SDK answers a handshake-era call with an SSE stream, keeps one read waiting for the
client to leave while it does, and cancels that read at the end. The cancellation's
traceback holds the frames of the read, and with them whatever those frames reach: the
ASGI ``receive`` and ``send`` of every layer the request went through. None of it is freed
until the garbage collector runs, and under load it is what pushes the collector into
its slow, whole-heap passes. charter's layers hand the server's own ``receive`` and
``send`` on without frames or closures of theirs (``BodyDeadline``'s ``_TimedRequest``,
``SessionLimiter``'s ``_Watched``, ``Body``'s ``Replay``), so they add nothing to it.

The whole app (``create_app``) under uvicorn on 127.0.0.1, in a thread of this process,
so that one collection sees both the server's garbage and the client's.
"""

from __future__ import annotations

import gc
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from mcp_support import Probe, build_host
from tests.builders import MCP_HEADERS, MCP_INITIALIZE

import charter
from charter.http import create_app
from live_server import serve

CHARTER_SOURCE = str(Path(charter.__file__).parent)
CALLS = 20


def _call(request_id: int) -> dict[str, object]:
    arguments = {"text": "hi", "times": 2}
    params = {"name": "echo", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _handshake_session(http: httpx.Client, url: str) -> dict[str, str]:
    """Open a handshake-era session; the headers of a request on it."""
    opened = http.post(url, json=MCP_INITIALIZE, headers=MCP_HEADERS)
    assert opened.status_code == 200, opened.text
    headers = {
        **MCP_HEADERS,
        "Mcp-Session-Id": opened.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post(url, json=done, headers=headers).status_code == 202
    return headers


@contextmanager
def _garbage() -> Iterator[list[object]]:
    """What becomes garbage (unreachable, freed only by the collector) inside the block."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list[object] = []
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()


def _charter_code(garbage: list[object]) -> list[str]:
    """The frames and functions of charter's own code among ``garbage``."""
    names = []
    for thing in garbage:
        code = None
        if isinstance(thing, types.FrameType):
            code = thing.f_code
        elif isinstance(thing, types.FunctionType):
            code = thing.__code__
        if code is not None and code.co_filename.startswith(CHARTER_SOURCE):
            names.append(f"{type(thing).__name__} {code.co_qualname}")
    return names


def test_an_sse_answer_leaves_no_frame_or_closure_of_charter_in_the_garbage() -> None:
    app = create_app(build_host(Probe(), authenticated=False))
    with serve(app) as base, httpx.Client(timeout=30) as http:
        url = base + "/mcp"
        headers = _handshake_session(http, url)
        for request_id in range(10, 13):  # first calls build what later ones reuse
            assert http.post(url, json=_call(request_id), headers=headers).status_code == 200
        with _garbage() as garbage:
            answers = [
                http.post(url, json=_call(request_id), headers=headers)
                for request_id in range(100, 100 + CALLS)
            ]
    assert all(a.headers["content-type"].startswith("text/event-stream") for a in answers)
    assert all('"text":"hihi"' in a.text.replace(" ", "") for a in answers)
    # The SDK's own cancelled reads did leave garbage: the check below looked at something.
    frames = [thing for thing in garbage if isinstance(thing, types.FrameType)]
    assert len(frames) >= CALLS
    assert _charter_code(garbage) == []
