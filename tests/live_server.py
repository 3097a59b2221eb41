"""A Starlette app under uvicorn on 127.0.0.1, in a thread, for tests that talk to a real server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

__all__ = ("ReportingServer", "loopback_socket", "serve")

STARTUP_SECONDS = 30


def loopback_socket() -> socket.socket:
    """A TCP socket bound to a free port on 127.0.0.1, to hand to uvicorn.

    IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections accepted from a
    socket whose protocol says TCP; without it each small reply waits ~40 ms for an ACK.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class ReportingServer(uvicorn.Server):
    """uvicorn, telling another thread when it serves (or that it gave up)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()


@contextmanager
def serve(app: ASGIApp) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 (a free port) in a thread; yield its base URL."""
    sock = loopback_socket()
    port = sock.getsockname()[1]
    server = ReportingServer(uvicorn.Config(app, lifespan="on", log_level="warning", ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    if not server.ready.wait(STARTUP_SECONDS) or not server.started:
        server.should_exit = True
        thread.join(10)
        sock.close()
        raise RuntimeError("uvicorn did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
