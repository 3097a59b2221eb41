"""Real servers on 127.0.0.1 for tests: a Starlette app under uvicorn in a thread, or a
``charter serve`` subprocess; and raw sockets to send them half a request."""

from __future__ import annotations

import contextlib
import ctypes
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import sqlalchemy as sa
import uvicorn
from starlette.types import ASGIApp
from tests.store.conftest import seed_migrated_sqlite

from charter.cli._common import DEFAULT_DB_URL

__all__ = (
    "ReportingServer",
    "Served",
    "charter_serve",
    "die_with_parent",
    "http_server",
    "interrupt",
    "json_server",
    "loopback_socket",
    "raw_connection",
    "read_until_closed",
    "serve",
)

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
def serve(app: ASGIApp, **config: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 (a free port) in a thread; yield its base URL.

    ``config`` adds ``uvicorn.Config`` options (``http=``, ``timeout_keep_alive=``, …).
    """
    sock = loopback_socket()
    port = sock.getsockname()[1]
    server = ReportingServer(
        uvicorn.Config(app, lifespan="on", log_level="warning", ws="none", **config)
    )
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


@dataclass
class Served:
    """A ``charter serve`` subprocess: where it listens and where it logs."""

    url: str
    process: subprocess.Popen[str]
    log: Path

    def read_log(self) -> str:
        return self.log.read_text()


@contextmanager
def charter_serve(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, migrated: bool = True
) -> Iterator[Served]:
    """``charter serve ARGS --port 0`` from ``cwd``, until the block ends; yields its URL.

    Runs this interpreter's ``charter`` (with this test run's ``PYTHONPATH``), waits for the
    banner that names the port, and stops the server with SIGINT afterwards, asserting it
    exits cleanly. Its stderr (uvicorn's and the SDK's log) goes to a file in ``cwd``.
    A SQLite database that does not exist yet starts as a copy of one at head
    (``seed_migrated_sqlite``), unless ``migrated=False``: then the server migrates it.
    """
    environment = {**os.environ, **(env or {})}
    for name in ("CHARTER_DB", "CHARTER_KEY", "CHARTER_PRINCIPAL_KEY"):
        if env is None or name not in env:
            environment.pop(name, None)
    database = sqlite_file(_db_option(args, environment), cwd)
    if migrated and database is not None:
        seed_migrated_sqlite(database)
    command = [sys.executable, "-m", "charter.cli", "serve", *args, "--port", "0"]
    log = cwd / f"serve-{time.monotonic_ns()}.log"
    with log.open("w") as err:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            preexec_fn=die_with_parent,
        )
    try:
        served = Served(url=_banner_url(process, log), process=process, log=log)
        # Keep reading what the server prints after its banner (its access log), so that a
        # long run never fills the pipe and stalls the server on a write.
        threading.Thread(target=_drain, args=(process.stdout,), daemon=True).start()
        yield served
    finally:
        code = interrupt(process)
        if process.stdout is not None:
            process.stdout.close()
    assert code == 0, log.read_text()


def _db_option(args: tuple[str, ...], env: Mapping[str, str]) -> str:
    """The database URL ``charter serve ARGS`` opens (``--db``, ``CHARTER_DB``, the default)."""
    for index, arg in enumerate(args[:-1]):
        if arg == "--db":
            return args[index + 1]
    return env.get("CHARTER_DB", DEFAULT_DB_URL)


def sqlite_file(url: str, cwd: Path) -> Path | None:
    """The file a SQLite ``url`` names (relative to ``cwd``); None for another database."""
    parsed = sa.make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return cwd / parsed.database


def _drain(stream: IO[str] | None) -> None:
    """Read ``stream`` to its end, throwing the text away."""
    if stream is not None:
        with contextlib.suppress(ValueError, OSError):  # closed under us: the server stopped
            for _ in stream:
                pass


def interrupt(process: subprocess.Popen[Any]) -> int:
    """Stop a server as Ctrl-C does and return its exit code (killed if it hangs 30 s)."""
    process.send_signal(signal.SIGINT)
    try:
        return process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def _banner_url(process: subprocess.Popen[str], log: Path) -> str:
    """The base URL from the banner `charter serve` prints once it listens (its REST line)."""
    assert process.stdout is not None
    for line in process.stdout:  # bounded by pytest's timeout should the server hang
        words = line.split()
        if words[:1] == ["REST"] and len(words) > 1:
            return words[1].removesuffix("/v1/tools")
    process.wait(30)
    raise RuntimeError(f"charter serve exited with {process.returncode}:\n{log.read_text()}")


def die_with_parent() -> None:
    """Stop the server if pytest itself is killed (Linux), so no orphan keeps running."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextmanager
def json_server(answer: Callable[[str], tuple[int, bytes]]) -> Iterator[str]:
    """A stdlib HTTP server on 127.0.0.1 whose GETs get ``answer(path)``: a status and JSON.

    Yields the server's base URL; stops it on the way out.
    """

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with http_server(Handler) as url:
        yield url


@contextmanager
def http_server(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """A stdlib threading HTTP server on 127.0.0.1 answering with ``handler``; its base URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
