"""examples/conformance.py in memory: each scenario's tool behaves as the suite expects.

``scripts/conformance`` runs the official suite itself (it needs Node); this keeps the
example honest in every test run.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import mcp.types as types
import pytest
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp_support import Logs

from charter.mcp import create_server

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).parents[2] / "examples" / "conformance.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("charter_conformance_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered first: pydantic resolves the models' postponed annotations through it.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def _model(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="pong"), model="m"
    )


class _User:
    def __init__(self) -> None:
        self.schemas: list[dict[str, Any]] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.schemas.append(params.requested_schema)
        return types.ElicitResult(action="accept", content={"username": "u", "email": "e"})


async def test_every_scenario_tool_answers_as_the_suite_expects(example: ModuleType) -> None:
    user = _User()
    server = create_server(example.build_host(), presenters=example.PRESENTERS)
    logs = Logs()

    async with Client(
        server,
        mode="legacy",
        sampling_callback=_model,
        elicitation_callback=user,
        logging_callback=logs,
    ) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}

        async def kinds(name: str, arguments: dict[str, Any] | None = None) -> list[str]:
            result = await client.call_tool(name, arguments or {})
            return [block.type for block in result.content]

        assert await kinds("test_simple_text") == ["text"]
        assert await kinds("test_image_content") == ["image"]
        assert await kinds("test_audio_content") == ["audio"]
        assert await kinds("test_embedded_resource") == ["resource"]
        assert await kinds("test_multiple_content_types") == ["text", "image", "resource"]
        assert await kinds("test_tool_with_logging") == ["text"]
        error = await client.call_tool("test_error_handling", {})
        sampled = await client.call_tool("test_sampling", {"prompt": "ping?"})
        elicited = await client.call_tool("test_elicitation", {"message": "Who are you?"})
        await client.call_tool("test_elicitation_sep1034_defaults", {})
        await client.call_tool("test_elicitation_sep1330_enums", {})

    schema = tools["json_schema_2020_12_tool"].input_schema
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "address" in schema["$defs"]
    assert schema["additionalProperties"] is False
    assert logs.data == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert error.is_error is True
    # PROVIDER_ERROR is a server fault: the client reads its code and error id, not its text.
    assert "[PROVIDER_ERROR] The tool failed inside the server. Error id: err_" in str(
        error.content[0]
    )
    assert sampled.structured_content == {"text": "LLM response: pong"}
    assert elicited.structured_content == {
        "text": 'User response: action=accept, content={"username": "u", "email": "e"}'
    }
    assert user.schemas[1]["properties"]["age"]["default"] == 30
    assert user.schemas[2]["properties"]["legacyEnum"]["enumNames"][0] == "Option One"
    json.dumps(user.schemas)  # the schemas went out as plain JSON
