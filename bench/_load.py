"""Servers in processes of their own, loaded by wrk: the pieces of the throughput cases.

A ``Server`` is one command (``python -m bench.load_servers …`` or ``charter serve …``)
started on 127.0.0.1 at a free port and waited for until it accepts connections; ``wrk``
runs Debian's wrk (a C load generator, ``make bench`` installs it when missing) against
one or more servers with ``bench/load.lua`` and returns a ``Load``: requests per second,
p50 and p99 latency, and the CPU time the server process spent per request (from
``/proc``, read before and after the run). Every answer is checked (status 200 and an
expected string in the body); a run with a bad answer or a socket error raises, so a case
never measures a fast failure.

``CHARTER_BENCH_LOAD_SECONDS`` (default 5) is the length of one wrk run and
``CHARTER_BENCH_LOAD_CONNECTIONS`` (default 16) its connections, for quicker runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import Load

__all__ = (
    "CONNECTIONS",
    "ROOT",
    "SECONDS",
    "Request",
    "Server",
    "free_port",
    "python_module",
    "rss_bytes",
    "wrk",
    "wrk_together",
)

ROOT = Path(__file__).resolve().parent.parent
SECONDS = float(os.environ.get("CHARTER_BENCH_LOAD_SECONDS", "5"))
CONNECTIONS = int(os.environ.get("CHARTER_BENCH_LOAD_CONNECTIONS", "16"))
_SCRIPT = Path(__file__).resolve().parent / "load.lua"
_READY_SECONDS = 60.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (the server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(kw_only=True)
class Server:
    """One server process: ``argv`` with ``{port}`` filled in, started by ``start``."""

    argv: Sequence[str]
    label: str
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    _log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Start the process (once) and wait until it accepts connections."""
        if self.process is not None:
            return
        self.port = free_port()
        argv = [part.replace("{port}", str(self.port)) for part in self.argv]
        self._log = tempfile.NamedTemporaryFile(prefix="charter-bench-", suffix=".log")
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + _READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.label} exited: {self._output()}")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            await writer.wait_closed()
            return
        raise RuntimeError(f"{self.label} did not listen within {_READY_SECONDS:g} s")

    def _output(self) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        text = Path(self._log.name).read_text(errors="replace").strip()
        return text[-2000:]

    async def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 10 s)."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                await asyncio.to_thread(process.wait, 10)
            except subprocess.TimeoutExpired:
                process.kill()
                await asyncio.to_thread(process.wait)
        if self._log is not None:
            self._log.close()
            self._log = None

    def rss(self) -> int:
        """The process's resident set size in bytes."""
        assert self.process is not None, f"{self.label} is not running"
        return rss_bytes(self.process.pid)

    def cpu_seconds(self) -> float:
        """The CPU time (user and system) the process has spent so far, in seconds."""
        assert self.process is not None, f"{self.label} is not running"
        return cpu_seconds(self.process.pid)


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` in bytes (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far, in seconds (Linux ``/proc``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces: fields are counted after its ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, kw_only=True)
class Request:
    """What wrk sends: a POST to ``path`` with ``body`` (placeholders: see load.lua)."""

    path: str
    body: bytes
    headers: Mapping[str, str]
    expect: str
    """A string every good answer's body contains."""


def _wrk_binary() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise RuntimeError("wrk is not installed: `make bench` installs it (apt-get install wrk)")
    return found


async def wrk(
    server: Server,
    request: Request,
    *,
    connections: int = CONNECTIONS,
    seconds: float | None = None,
    calls: int | None = None,
    threads: int = 2,
    warmup: bool = False,
) -> Load:
    """One wrk run against ``server``: ``seconds`` long (default ``SECONDS``), or until
    ``calls`` answers. A ``warmup`` run may end before any answer arrives (a slow
    database), which a measured run may not."""
    seconds = SECONDS if seconds is None else seconds
    with tempfile.NamedTemporaryFile(prefix="charter-wrk-", suffix=".json") as body:
        body.write(request.body)
        body.flush()
        env = {
            **os.environ,
            "CHARTER_WRK_BODY": body.name,
            "CHARTER_WRK_RUN": secrets.token_hex(4),
            "CHARTER_WRK_EXPECT": request.expect,
        }
        if calls is not None:
            threads = 1
            env["CHARTER_WRK_LIMIT"] = str(calls)
            seconds = 3600
        argv = [
            _wrk_binary(),
            f"-t{min(threads, connections)}",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "30s",
            "-s",
            str(_SCRIPT),
        ]
        for name, value in request.headers.items():
            argv += ["-H", f"{name}: {value}"]
        argv.append(server.url + request.path)
        done = Path(body.name + ".done")
        env["CHARTER_WRK_DONE"] = str(done)
        cpu_before = server.cpu_seconds()
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        finished = asyncio.ensure_future(process.communicate())
        if calls is not None:
            # wrk's main thread sleeps out -d even after every thread stopped: interrupt
            # it once the script says the calls are answered (it then reports as usual).
            while not finished.done():
                if done.exists():
                    process.send_signal(signal.SIGINT)
                    break
                await asyncio.sleep(0.2)
        out, err = await finished
        cpu = server.cpu_seconds() - cpu_before
        done.unlink(missing_ok=True)
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({process.returncode}): {err.decode()[-500:]}")
    summary = json.loads(lines[-1])
    if summary["bad"] or summary["socket_errors"] or not (summary["requests"] or warmup):
        raise RuntimeError(
            f"{server.label}: {summary['bad']} bad answers and {summary['socket_errors']} "
            f"socket errors in {summary['requests']} requests"
        )
    if not summary["requests"]:
        return Load(requests_per_second=0, p50_ms=0, p99_ms=0, cpu_ms=0)
    return Load(
        requests_per_second=summary["requests"] / (summary["duration_us"] / 1e6),
        p50_ms=summary["p50_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        cpu_ms=cpu * 1000 / summary["requests"],
    )


async def wrk_together(
    pairs: Sequence[tuple[Server, Request]],
    *,
    connections: int = CONNECTIONS,
    seconds: float | None = None,
    warmup: bool = False,
) -> Load:
    """One wrk per server at once, ``connections`` shared out: the summed throughput, the
    slowest server's latencies, the servers' CPU time per request over all of them."""
    share = max(1, connections // len(pairs))
    loads = await asyncio.gather(
        *(
            wrk(server, request, connections=share, threads=1, seconds=seconds, warmup=warmup)
            for server, request in pairs
        )
    )
    rate = sum(load.requests_per_second for load in loads)
    return Load(
        requests_per_second=rate,
        p50_ms=max(load.p50_ms for load in loads),
        p99_ms=max(load.p99_ms for load in loads),
        # Weighted by each server's share of the requests (their runs last as long).
        cpu_ms=sum(load.cpu_ms * load.requests_per_second for load in loads) / rate if rate else 0,
    )


def python_module(module: str, *args: str) -> list[str]:
    """``python -m module args…`` with this interpreter."""
    return [sys.executable, "-m", module, *args]
