"""The bridges import their frameworks only when used, and name the extra when missing."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.builders import packages_loaded_by

import charter.harness.providers as harness_providers
import charter.providers as providers

BLOCK_AND_IMPORT = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None  # makes "import name" raise ImportError
try:
    import {module}
except ImportError as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("charter.integrations.pydantic_ai", ["pydantic_ai"], "charter[pydantic-ai]"),
        ("charter.integrations.langchain", ["langchain_core"], "charter[langchain]"),
    ],
)
def test_a_missing_framework_raises_import_error_naming_the_extra(
    module: str, blocked: list[str], extra: str
) -> None:
    code = BLOCK_AND_IMPORT.format(blocked=blocked, module=module)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert extra in result.stdout


def test_importing_the_harness_providers_and_integrations_imports_no_framework() -> None:
    modules = "charter.harness, charter.harness.providers, charter.providers, charter.integrations"
    frameworks = ("openai", "anthropic", "pydantic_ai", "langchain_core", "langgraph")
    assert packages_loaded_by(modules, frameworks) == []


def test_charter_providers_re_exports_the_harness_providers_unchanged() -> None:
    assert providers.__all__ == harness_providers.__all__
    for name in harness_providers.__all__:
        assert getattr(providers, name) is getattr(harness_providers, name), name
