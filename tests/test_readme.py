from __future__ import annotations

import json

import pytest
from tests import doc_blocks
from tests.builders import ROOT, run_example


def readme_blocks() -> list[str]:
    """The README's Python blocks that have no not-run marker (tests/doc_blocks.py)."""
    return [b.code for b in doc_blocks.runnable(ROOT / "README.md", doc_blocks.PYTHON)]


def test_the_readme_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# charter\n\n```\nmake run\nmake test\n```\n")


def test_the_readme_quickstart_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = readme_blocks()
    assert len(blocks) >= 3
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "{'trip_id': 'trp_1', 'destination': 'Lisbon', 'nights': 4}" in out
    assert 'Did you mean "get_trip"?' in out
    manifest = json.loads(out[out.index("[\n") :])
    assert [entry["name"] for entry in manifest] == ["get_trip", "change_destination"]


def test_the_quickstart_example_runs() -> None:
    lines = run_example("examples.quickstart")
    assert lines[0].startswith("greet {'name': 'Ada'} -> {\"kind\":\"completed\"")
    assert '"code":"NOT_FOUND"' in lines[3]
    manifest = json.loads("\n".join(lines[4:]))
    assert [entry["name"] for entry in manifest] == ["greet", "save_note"]
