"""`charter diff`, `charter lock` and the pytest helper, driven through the real CLI."""

from __future__ import annotations

import http.server
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from charter._target import load_target, manifest_of, registry_of
from charter.cli import app
from charter.evolution import ManifestError, lock_json
from charter.testing import assert_compatible_with_lock
from live_server import http_server

runner = CliRunner()

TOOLS_MODULE = '''
from typing import Literal

from pydantic import BaseModel

import charter
from charter.host import Host


class SearchIn(BaseModel):
    cabin: Literal[{cabins}]


class SearchOut(BaseModel):
    fares: list[int]


@charter.tool(tier="read", capability_version="{version}", aliases={aliases}, {extra})
def {function}(args: SearchIn) -> SearchOut:
    """Search fares."""
    return SearchOut(fares=[])


registry = charter.Registry()
registry.register({function})
host = Host(registry)


def build() -> charter.Registry:
    return registry


not_a_registry = 42
'''

WIDE = '"economy", "premium", "business"'
NARROW = '"economy", "business"'


@pytest.fixture
def write_module(write_target: Callable[[str], str]) -> Callable[..., str]:
    """Write a tools module (``TOOLS_MODULE`` with these fields); returns the name to import."""

    def write(
        *,
        cabins: str = WIDE,
        version: str = "v1",
        function: str = "search_flights",
        aliases: str = "()",
        extra: str = "",
    ) -> str:
        return write_target(
            TOOLS_MODULE.format(
                cabins=cabins, version=version, function=function, aliases=aliases, extra=extra
            )
        )

    return write


def manifest_file(path: Path, module: str) -> Path:
    registry = registry_of(load_target(f"{module}:registry"))
    path.write_text(registry.manifest_json(), encoding="utf-8")
    return path


# --- charter diff -------------------------------------------------------------------------


def test_diff_of_identical_manifests_exits_0(tmp_path: Path, write_module: Any) -> None:
    module = write_module()
    old = manifest_file(tmp_path / "old.json", module)
    result = runner.invoke(app, ["diff", str(old), str(old)])
    assert result.exit_code == 0, result.output
    assert "OK: 1 tool compared, 0 changed" in result.output


def test_diff_with_an_unversioned_breaking_change_exits_1_and_names_it(
    tmp_path: Path, write_module: Any
) -> None:
    old = manifest_file(tmp_path / "old.json", write_module())
    new = manifest_file(tmp_path / "new.json", write_module(cabins=NARROW))
    result = runner.invoke(app, ["diff", str(old), str(new)])
    assert result.exit_code == 1, result.output
    assert "search_flights" in result.output
    assert "inputSchema.cabin" in result.output
    assert 'values removed: "premium"' in result.output
    assert "FAIL" in result.output


def test_diff_with_a_major_version_bump_exits_0(tmp_path: Path, write_module: Any) -> None:
    old = manifest_file(tmp_path / "old.json", write_module())
    new = manifest_file(tmp_path / "new.json", write_module(cabins=NARROW, version="v2"))
    result = runner.invoke(app, ["diff", str(old), str(new)])
    assert result.exit_code == 0, result.output
    assert "breaking, allowed: major version bump" in result.output


def test_diff_json_output_parses(tmp_path: Path, write_module: Any) -> None:
    old = manifest_file(tmp_path / "old.json", write_module())
    new = manifest_file(tmp_path / "new.json", write_module(cabins=NARROW))
    result = runner.invoke(app, ["diff", str(old), str(new), "--json"])
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert document["summary"]["unversionedBreaking"] == 1
    assert document["tools"][0]["changes"][0]["kind"] == "enum-values-removed"


def test_diff_accepts_a_lock_file_as_either_side(tmp_path: Path, write_module: Any) -> None:
    module = write_module()
    lock = tmp_path / "charter.lock.json"
    assert runner.invoke(app, ["lock", f"{module}:registry", "-o", str(lock)]).exit_code == 0
    new = manifest_file(tmp_path / "new.json", module)
    assert runner.invoke(app, ["diff", str(lock), str(new)]).exit_code == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "error: cannot read"),
        ("{not json", "is not valid JSON"),
        ('{"lockVersion": 9, "tools": []}', "lockVersion 9 is not supported"),
        ('[{"description": "no name"}]', "entry 0 is not an object with a string 'name'"),
    ],
)
def test_unreadable_input_exits_2_with_one_line(
    tmp_path: Path, content: str | None, message: str
) -> None:
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content, encoding="utf-8")
    good = tmp_path / "good.json"
    good.write_text("[]", encoding="utf-8")
    result = runner.invoke(app, ["diff", str(bad), str(good)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_debug_shows_the_underlying_exception(tmp_path: Path) -> None:
    result = runner.invoke(app, ["diff", str(tmp_path / "missing.json"), "[]", "--debug"])
    assert isinstance(result.exception, ManifestError)


# --- URLs ---------------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A real HTTP server on localhost that serves files from tmp_path (and 404s)."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(tmp_path), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output clean

    with http_server(Handler) as url:
        yield url


def test_a_url_returning_json_nested_too_deeply_exits_2(tmp_path: Path, server: str) -> None:
    # The JSON parser recurses per level; a traceback would exit 1, which CI reads as
    # "breaking".
    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000, encoding="utf-8")
    (tmp_path / "old.json").write_text("[]", encoding="utf-8")
    result = runner.invoke(app, ["diff", str(tmp_path / "old.json"), f"{server}/deep.json"])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "nested too deeply to read" in lines[0]


def test_diff_reads_a_discovery_document_from_a_url(
    tmp_path: Path, write_module: Any, server: str
) -> None:
    old = manifest_file(tmp_path / "old.json", write_module())
    new_entries = json.loads(
        manifest_file(tmp_path / "new.json", write_module(cabins=NARROW)).read_text()
    )
    (tmp_path / "discovery.json").write_text(json.dumps({"tools": new_entries}), encoding="utf-8")
    result = runner.invoke(
        app, ["diff", str(old), f"{server}/discovery.json", "-H", "Authorization: Bearer x"]
    )
    assert result.exit_code == 1, result.output
    assert 'values removed: "premium"' in result.output


def test_a_url_that_fails_exits_2(tmp_path: Path, server: str) -> None:
    (tmp_path / "old.json").write_text("[]", encoding="utf-8")
    result = runner.invoke(app, ["diff", str(tmp_path / "old.json"), f"{server}/missing.json"])
    assert result.exit_code == 2
    assert "cannot fetch" in result.stderr and "404" in result.stderr


# --- charter lock -------------------------------------------------------------------------


@pytest.mark.parametrize("attribute", ["registry", "host", "build"])
def test_lock_writes_stable_json_from_a_registry_a_host_or_a_factory(
    tmp_path: Path, write_module: Any, attribute: str
) -> None:
    module = write_module()
    lock = tmp_path / "charter.lock.json"
    result = runner.invoke(app, ["lock", f"{module}:{attribute}", "--output", str(lock)])
    assert result.exit_code == 0, result.output
    assert f"wrote {lock} (1 tool)" in result.output.replace("\n", "")
    text = lock.read_text(encoding="utf-8")
    assert text == lock_json(manifest_of(load_target(f"{module}:registry")))
    document = json.loads(text)
    assert document["lockVersion"] == 1
    assert [t["name"] for t in document["tools"]] == ["search_flights"]
    assert text.endswith("\n") and text == json.dumps(document, sort_keys=True, indent=2) + "\n"


def test_lock_check_passes_when_nothing_broke(tmp_path: Path, write_module: Any) -> None:
    module = write_module()
    lock = tmp_path / "charter.lock.json"
    runner.invoke(app, ["lock", f"{module}:registry", "-o", str(lock)])
    result = runner.invoke(app, ["lock", f"{module}:registry", "-o", str(lock), "--check"])
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


def test_lock_check_fails_on_an_unversioned_breaking_change(
    tmp_path: Path, write_module: Any
) -> None:
    lock = tmp_path / "charter.lock.json"
    runner.invoke(app, ["lock", f"{write_module()}:registry", "-o", str(lock)])
    before = lock.read_text()
    narrowed = write_module(cabins=NARROW)
    result = runner.invoke(app, ["lock", f"{narrowed}:registry", "-o", str(lock), "--check"])
    assert result.exit_code == 1, result.output
    assert 'values removed: "premium"' in result.output
    assert lock.read_text() == before  # --check never rewrites the lock


def test_lock_check_accepts_a_new_name_with_the_old_one_a_deprecated_alias(
    tmp_path: Path, write_module: Any
) -> None:
    lock = tmp_path / "charter.lock.json"
    runner.invoke(app, ["lock", f"{write_module()}:registry", "-o", str(lock)])
    renamed = write_module(
        cabins=NARROW,
        function="search_fares",
        aliases='("search_flights",)',
        extra='deprecation=charter.Deprecation(since_version="v1", message="Use search_fares.")',
    )
    result = runner.invoke(
        app, ["lock", f"{renamed}:registry", "-o", str(lock), "--check", "--json"]
    )
    assert result.exit_code == 0, result.output
    [tool] = json.loads(result.stdout)["tools"]
    assert (tool["status"], tool["renamedTo"]) == ("renamed", "search_fares")
    assert (
        tool["excuse"] == "old name 'search_flights' kept as a deprecated alias of 'search_fares'"
    )


def test_lock_check_without_a_lock_file_says_to_create_one(
    tmp_path: Path, write_module: Any
) -> None:
    module = write_module()
    result = runner.invoke(
        app, ["lock", f"{module}:registry", "-o", str(tmp_path / "none.json"), "--check"]
    )
    assert result.exit_code == 2
    assert f"run `charter lock {module}:registry` first" in result.stderr


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "no_such_module_for_charter:registry",
            "cannot import module 'no_such_module_for_charter'",
        ),
        ("just_a_module", "must look like 'module:attribute'"),
        ("{module}:missing", "has no attribute 'missing'"),
        ("{module}:not_a_registry", "int is not a charter Registry or Host"),
    ],
)
def test_a_bad_target_exits_2(tmp_path: Path, write_module: Any, target: str, message: str) -> None:
    module = write_module()
    result = runner.invoke(
        app, ["lock", target.format(module=module), "-o", str(tmp_path / "l.json")]
    )
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "l.json").exists()


def test_a_target_module_that_fails_to_import_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "charter_broken_tools.py").write_text("raise RuntimeError('boom')\n")
    result = runner.invoke(app, ["lock", "charter_broken_tools:registry"])
    sys.modules.pop("charter_broken_tools", None)
    assert result.exit_code == 2
    assert "importing module 'charter_broken_tools' failed: RuntimeError('boom')" in result.stderr


# --- the pytest helper ----------------------------------------------------------------------


def test_assert_compatible_with_lock_passes_for_compatible_tools(
    tmp_path: Path, write_module: Any
) -> None:
    module = write_module()
    lock = tmp_path / "charter.lock.json"
    runner.invoke(app, ["lock", f"{module}:registry", "-o", str(lock)])
    assert_compatible_with_lock(load_target(f"{module}:registry"), lock)
    assert_compatible_with_lock(load_target(f"{module}:host"), str(lock))


def test_assert_compatible_with_lock_raises_a_readable_report(
    tmp_path: Path, write_module: Any
) -> None:
    lock = tmp_path / "charter.lock.json"
    runner.invoke(app, ["lock", f"{write_module()}:registry", "-o", str(lock)])
    narrowed = load_target(f"{write_module(cabins=NARROW)}:registry")
    with pytest.raises(AssertionError) as raised:
        assert_compatible_with_lock(narrowed, lock)
    report = str(raised.value)
    assert "search_flights (v1): BREAKING" in report
    assert '[breaking] inputSchema.cabin: values removed: "premium"' in report


def test_assert_compatible_with_lock_without_a_lock_file_fails(
    tmp_path: Path, write_module: Any
) -> None:
    with pytest.raises(AssertionError, match="run `charter lock"):
        assert_compatible_with_lock(
            load_target(f"{write_module()}:registry"), tmp_path / "none.json"
        )


# --- the worked example in docs/versioning.md -------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "versioning.md"


def _fenced(language: str) -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def _expected_output(block: str) -> list[str]:
    """The lines a console block shows after its first command, up to the next command."""
    lines = block.splitlines()[1:]
    end = next((i for i, line in enumerate(lines) if line.startswith("$ ")), len(lines))
    return lines[:end]


def test_the_worked_example_in_the_docs_is_what_the_cli_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    module, bumped, renamed = _fenced("python")[:3]
    decorator = '@charter.tool(tier="read", name="flights.search", capability_version="v1")\n'
    assert decorator in module
    narrow = module.replace('"economy", "premium", "business"', '"economy", "business"')
    sources = {
        "docs_flights_v1": module,
        "docs_flights_narrow": narrow,
        "docs_flights_bumped": narrow.replace(decorator, bumped),
        "docs_flights_renamed": "import datetime\n" + narrow.replace(decorator, renamed),
    }
    for name, source in sources.items():
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    lock = str(tmp_path / "charter.lock.json")
    consoles = _fenced("console")
    try:
        written = runner.invoke(app, ["lock", "docs_flights_v1:registry", "-o", lock])
        assert written.exit_code == 0, written.output
        for name, block, status in zip(
            ["docs_flights_narrow", "docs_flights_bumped", "docs_flights_renamed"],
            consoles[1:4],
            [1, 0, 0],
            strict=True,
        ):
            result = runner.invoke(
                app, ["lock", f"{name}:registry", "-o", lock, "--check"], env={"COLUMNS": "100"}
            )
            assert result.exit_code == status, result.output
            shown = [line.rstrip() for line in result.output.splitlines()]
            # A sunset warning appears once today is past the example's sunset date.
            shown = [line for line in shown if not line.startswith("warning:")]
            assert shown == _expected_output(block)
    finally:
        for name in sources:
            sys.modules.pop(name, None)
