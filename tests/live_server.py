"""A Starlette app under uvicorn on 127.0.0.1, in a thread, for tests that talk to a real server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import uvicorn
from starlette.types import ASGIApp

__all__ = ("ReportingServer", "loopback_socket", "raw_connection", "read_until_closed", "serve")

STARTUP_SECONDS = 30
CLOSE_SECONDS = 60
"""The bound on waiting for a server to close a connection it should close."""


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


def raw_connection(url: str, sent: bytes = b"") -> socket.socket:
    """A TCP connection to the server at ``url``, after sending ``sent`` (often half a request)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    sock = socket.create_connection((parts.hostname, parts.port), timeout=STARTUP_SECONDS)
    if sent:
        sock.sendall(sent)
    return sock


def read_until_closed(sock: socket.socket, seconds: float = CLOSE_SECONDS) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts).

    Raises:
        TimeoutError: The server kept the connection open for ``seconds``.
    """
    deadline = time.monotonic() + seconds
    received = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"the server kept the connection open for {seconds} s")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return bytes(received)
        except TimeoutError:
            continue
        if not chunk:
            return bytes(received)
        received += chunk
