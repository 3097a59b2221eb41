from __future__ import annotations

import json
import re
import sys
import types
from datetime import date
from pathlib import Path

import pytest
from pydantic import BaseModel

from charter import (
    ActionPolicy,
    Deprecation,
    Registry,
    RiskPolicy,
    ToolBinding,
    define_tool,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
JSON_BLOCK = re.compile(r"^```json\n(.*?)^```$", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("page", ["contract.md", "limits.md", "notifications.md"])
def test_the_code_in_the_docs_runs_as_written(page: str) -> None:
    blocks = PYTHON_BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))
    assert blocks
    # A real module, so dataclasses and postponed annotations resolve as in user code.
    module = types.ModuleType(f"docs_{page.removesuffix('.md')}")
    sys.modules[module.__name__] = module
    try:
        for number, block in enumerate(blocks, start=1):
            exec(compile(block, f"docs/{page} python block {number}", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]


class Rename(BaseModel):
    trip_id: str
    title: str
    tenant_id: str


class Trip(BaseModel):
    trip_id: str
    title: str


def rename(args: Rename) -> Trip:
    return Trip(trip_id=args.trip_id, title=args.title)


def test_the_manifest_format_example_is_a_real_entry() -> None:
    text = (DOCS / "manifest-format.md").read_text(encoding="utf-8")
    example = json.loads(JSON_BLOCK.findall(text)[0])
    tool = define_tool(
        name="trips.rename",
        description="Rename a trip.",
        input_schema=Rename,
        output_schema=Trip,
        handler=rename,
        tier="write",
        risk_policy=RiskPolicy(
            destructive=False,
            reversible=True,
            dry_run_supported=False,
            side_effects=("data-write",),
        ),
        aliases=["trip_rename"],
        deprecation=Deprecation(
            since_version="2",
            message="Use trips.update.",
            replacement_capability_id="trips.update",
            sunset_date=date(2027, 1, 31),
        ),
        required_scopes=["trips:write"],
        audience=["staff"],
        tenant_field="tenant_id",
        action_policy=ActionPolicy(target_type="trip", command_target_field="trip_id"),
    )
    binding = ToolBinding(
        capability_id="travel.trips.rename", owner="travel", capability_version="1.0.0"
    )
    entry = Registry().register(tool, binding).entry
    # The example elides the schemas; everything else is exactly what the code produces.
    for key in ("inputSchema", "outputSchema"):
        assert example[key]["$schema"] == entry[key]["$schema"]
        assert example[key]["type"] == entry[key]["type"]
        example[key] = entry[key]
    assert example == entry
