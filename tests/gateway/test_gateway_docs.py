"""docs/gateway.md: its file and its Python say the same thing, and both are valid."""

from __future__ import annotations

import re
import sys
import tomllib
import types
from pathlib import Path

from charter.gateway import UpstreamConfig, parse_config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"


def block(language: str) -> str:
    found = re.search(rf"^```{language}\n(.*?)^```$", PAGE.read_text("utf-8"), re.S | re.M)
    assert found is not None
    return found.group(1)


def test_the_worked_examples_file_and_python_describe_the_same_upstream() -> None:
    config = parse_config(tomllib.loads(block("toml")), source="docs/gateway.md")
    assert sorted(config.upstreams) == ["fs", "github"]
    assert config.upstreams["github"].effective_namespace == "gh"
    module = types.ModuleType("docs_gateway")
    sys.modules[module.__name__] = module
    try:
        exec(compile(block("python"), "docs/gateway.md python block", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    fs = module.__dict__["fs"]
    assert isinstance(fs, UpstreamConfig)
    assert fs == config.upstreams["fs"]
    assert fs.policy_for("write_file").tier == "destructive"
    assert fs.policy_for("read_text_file").scopes == ("files:read",)
