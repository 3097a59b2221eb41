"""The demo's REST API against its own OpenAPI document: `schemathesis run --checks all`
against `charter serve examples.travel:host` (as `make run` serves it) on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from demo_server import serve_demo

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
HERE = Path(__file__).resolve().parent
OPTIONS = [
    "--no-color",
    "--checks", "all",
    # Replaced by the same check with the documented stateful refusals let through.
    "--exclude-checks", "positive_data_acceptance",
    # The key is sent as a header; a generated X-API-Key beside it would be two
    # credentials, which charter refuses (400) by design.
    "--generation-with-security-parameters", "false",
    # Bounded and repeatable: few examples per operation, no randomness (which also means
    # no example database between runs), one request at a time.
    "--max-examples", "3",
    "--generation-deterministic",
    "--workers", "1",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(600)  # about 1,900 requests; far less than this on a loaded machine
def test_the_demo_conforms_to_its_openapi_document_under_every_check(tmp_path: Path) -> None:
    """Every operation, every check, positive and negative data, all four phases.

    The one exception is schemathesis's ``positive_data_acceptance``, replaced by the same
    check that lets through the refusals of schema-valid data that no OpenAPI document can
    rule out (``schemathesis_hooks.py``; docs/http.md, "Conformance with its own OpenAPI").
    """
    with serve_demo(tmp_path) as served:
        # The admin scope satisfies every scope check: one key reaches every operation.
        admin = served.headers("admin")
        document = httpx.get(f"{served.url}/v1/openapi.json", headers=admin).json()
        # Every operation but the document's own: schemathesis skips the URL it loaded.
        operations = sum(len(methods) for methods in document["paths"].values()) - 1
        assert "get" in document["paths"]["/v1/openapi.json"]
        url = f"{served.url}/v1/openapi.json"
        auth = f"Authorization: {admin['Authorization']}"
        run = subprocess.run(
            [SCHEMATHESIS, "run", url, "--header", auth, *OPTIONS],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(HERE), "SCHEMATHESIS_HOOKS": "schemathesis_hooks"},
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Tested: {operations}" in run.stdout, run.stdout
    assert operations > 30
