"""Resources, resource templates, prompts and completions over streamable HTTP.

uvicorn on 127.0.0.1 and the official MCP client; every decision is the host's.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import AsyncExitStack

import anyio
import mcp.types as types
import pytest
from mcp.client import Client
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_support import serve
from pydantic import BaseModel
from tests.builders import mcp_http_client

from charter import tool
from charter.host import Host
from charter.mcp import OUTCOME_META_KEY, create_asgi_app, create_server
from content_support import ADA, GUS, build_content_host

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Host]]:
    host = build_content_host()
    with serve(create_asgi_app(host)) as url:
        yield url + "/mcp", host


@pytest.fixture
def url(served: tuple[str, Host]) -> str:
    """The MCP endpoint's URL, for the tests that do not look at the host."""
    return served[0]


async def test_an_agent_lists_what_it_may_read_and_reads_its_own_tenants_trip(
    url: str, mode: str
) -> None:
    async with mcp_http_client(url, "ada-token", mode=mode) as client:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        read = await client.read_resource("trip://T-1")
    assert sorted(str(r.uri) for r in resources) == ["handbook://travel", "logo://travel.png"]
    assert [(t.uri_template, t.name, t.mime_type) for t in templates] == [
        ("trip://{trip_id}", "trip", "application/json")
    ]
    [contents] = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert contents.mime_type == "application/json"
    assert json.loads(contents.text) == {"id": "T-1", "name": "Lisbon offsite", "tenant": "acme"}


async def test_binary_resources_are_base64_blobs(url: str) -> None:
    async with mcp_http_client(url, "ada-token") as client:
        read = await client.read_resource("logo://travel.png")
    [contents] = read.contents
    assert isinstance(contents, types.BlobResourceContents)
    assert base64.b64decode(contents.blob) == b"\x89PNG\r\n\x1a\n"
    assert contents.mime_type == "image/png"


async def test_a_second_tenant_with_the_same_subject_cannot_read_the_first_tenants_trip(
    url: str, mode: str
) -> None:
    async with mcp_http_client(url, "gus-token", mode=mode) as client:
        own = await client.read_resource("trip://T-9")
        with pytest.raises(MCPError) as foreign:
            await client.read_resource("trip://T-1")
    assert json.loads(own.contents[0].text)["tenant"] == "globex"  # type: ignore[union-attr]
    assert foreign.value.code == -32002
    assert foreign.value.data[OUTCOME_META_KEY]["code"] == "NOT_FOUND"


async def test_a_missing_scope_hides_the_template_and_refuses_the_read_naming_the_scope(
    url: str, mode: str
) -> None:
    async with mcp_http_client(url, "newt-token", mode=mode) as client:
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
        with pytest.raises(MCPError) as read:
            await client.read_resource("trip://T-1")
        with pytest.raises(MCPError) as got:
            await client.get_prompt("trips.summary", {"trip_id": "T-1"})
    assert templates == [] and prompts == []
    assert read.value.code == types.INVALID_REQUEST
    assert "trips:read" in read.value.message
    assert read.value.data[OUTCOME_META_KEY]["meta"] == {
        "reason": "insufficient_scope",
        "required": ["trips:read"],
        "granted": ["notes:read"],
        "missing": ["trips:read"],
    }
    assert got.value.data[OUTCOME_META_KEY]["code"] == "AUTHORIZATION_DENIED"


async def test_a_wildcard_grant_reads_and_admin_only_resources_stay_hidden(
    url: str,
) -> None:
    async with mcp_http_client(url, "wild-token") as client:
        read = await client.read_resource("trip://T-2")
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        with pytest.raises(MCPError) as admin:
            await client.read_resource("audit://export")
    async with mcp_http_client(url, "olga-token") as client:
        export = await client.read_resource("audit://export")
    assert json.loads(read.contents[0].text)["name"] == "Lima sales trip"  # type: ignore[union-attr]
    assert "audit://export" not in listed
    assert admin.value.data[OUTCOME_META_KEY]["code"] == "AUTHORIZATION_DENIED"
    assert export.contents[0].text == "everything"  # type: ignore[union-attr]


async def test_hostile_uris_and_arguments_get_typed_errors(url: str) -> None:
    async with mcp_http_client(url, "ada-token") as client:
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("trip://T-1/../../etc/passwd")
        with pytest.raises(MCPError) as invalid:
            await client.read_resource("trip://%00")
        with pytest.raises(MCPError) as no_prompt:
            await client.get_prompt("nope", {})
        with pytest.raises(MCPError) as missing_arg:
            await client.get_prompt("trips.summary", {})
    assert unknown.value.code == -32002
    assert invalid.value.code == types.INVALID_PARAMS
    assert invalid.value.data[OUTCOME_META_KEY]["code"] == "INVALID_INPUT"
    assert no_prompt.value.code == types.INVALID_PARAMS
    assert missing_arg.value.data[OUTCOME_META_KEY]["code"] == "INVALID_INPUT"


async def test_prompts_are_listed_with_arguments_and_rendered_for_the_callers_tenant(
    url: str, mode: str
) -> None:
    async with mcp_http_client(url, "ada-token", mode=mode) as client:
        [listed] = (await client.list_prompts()).prompts
        got = await client.get_prompt("trips.summary", {"trip_id": "T-1", "tone": "cheerful"})
    assert listed.name == "trips.summary" and listed.title == "Trip summary"
    assert [(a.name, a.required) for a in listed.arguments or []] == [
        ("trip_id", True),
        ("tone", False),
    ]
    [message] = got.messages
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Summarise Lisbon offsite in a cheerful tone."


async def test_completions_suggest_only_the_callers_own_values(url: str, mode: str) -> None:
    template = types.ResourceTemplateReference(type="ref/resource", uri="trip://{trip_id}")
    summary = types.PromptReference(type="ref/prompt", name="trips.summary")
    async with mcp_http_client(url, "ada-token", mode=mode) as client:
        acme = await client.complete(template, {"name": "trip_id", "value": "T-"})
        by_prompt = await client.complete(summary, {"name": "trip_id", "value": "T-2"})
        nothing = await client.complete(summary, {"name": "tone", "value": ""})
    async with mcp_http_client(url, "gus-token", mode=mode) as client:
        globex = await client.complete(template, {"name": "trip_id", "value": "T-"})
    async with mcp_http_client(url, "newt-token", mode=mode) as client:
        with pytest.raises(MCPError) as hidden:
            await client.complete(template, {"name": "trip_id", "value": "T-"})
    assert acme.completion.values == ["T-1", "T-2"]
    assert by_prompt.completion.values == ["T-2"]
    assert nothing.completion.values == []
    assert globex.completion.values == ["T-9"]
    assert hidden.value.data[OUTCOME_META_KEY]["code"] == "NOT_FOUND"


async def test_reads_and_prompts_are_audited_with_the_caller_and_tenant(
    served: tuple[str, Host],
) -> None:
    url, host = served
    async with mcp_http_client(url, "gus-token") as client:
        await client.read_resource("trip://T-9")
        await client.get_prompt("trips.summary", {"trip_id": "T-9"})
    events = await host.audit.events(tenant="globex", limit=10)
    seen = {(e.action, e.tool, e.outcome, e.subject) for e in events}
    assert ("resource.read", "trip://T-9", "completed", "ada") in seen
    assert ("prompt.get", "trips.summary", "completed", "ada") in seen


# resources/subscribe is a handshake-era method; the SDK client warns that 2026-07-28 drops it.
_SUBSCRIBE_DEPRECATED = pytest.mark.filterwarnings(
    "ignore:resources/.*subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning"
)
_BOTH_ERAS = pytest.mark.parametrize("era", ["legacy", "auto"], ids=["subscribe", "listen"])
"""Handshake-era ``resources/subscribe`` and 2026-07-28 ``subscriptions/listen``."""


class _Updates:
    """A client's message handler that keeps the URIs of resource-updated notifications."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.told = anyio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self.told.set()


@_SUBSCRIBE_DEPRECATED
async def test_a_subscriber_is_told_when_a_resource_it_may_read_changes(
    url: str,
) -> None:
    updates = _Updates()
    async with mcp_http_client(url, "ada-token", mode="legacy", message_handler=updates) as client:
        await client.subscribe_resource("trip://T-1")
        await client.subscribe_resource("trip://T-2")
        await client.unsubscribe_resource("trip://T-2")
        await client.call_tool("trips.touch", {"trip_id": "T-2"})
        await client.call_tool("trips.touch", {"trip_id": "T-1"})
        with anyio.fail_after(10):
            await updates.told.wait()
    assert updates.uris == ["trip://T-1"]


@_SUBSCRIBE_DEPRECATED
@_BOTH_ERAS
async def test_subscribing_to_a_resource_the_caller_may_not_read_is_refused(
    url: str, era: str
) -> None:
    async with mcp_http_client(url, "newt-token", mode=era) as client:
        with pytest.raises(MCPError) as refused:
            if era == "legacy":
                await client.subscribe_resource("trip://T-1")
            else:  # 2026-07-28: subscriptions/listen
                async with client.listen(resource_subscriptions=["trip://T-1"]):
                    pass
    assert refused.value.data[OUTCOME_META_KEY]["code"] == "AUTHORIZATION_DENIED"


@_SUBSCRIBE_DEPRECATED
@_BOTH_ERAS
async def test_a_subscriber_is_not_told_when_another_tenants_same_named_resource_changes(
    era: str, url: str
) -> None:
    """trip://{trip_id} resolves in the reader's tenant: acme's T-1 changing is not globex's."""
    updates = _Updates()
    uris = ["trip://T-1", "trip://T-9"]
    async with mcp_http_client(url, "ada-token") as acme:
        handler = updates if era == "legacy" else None
        async with mcp_http_client(url, "gus-token", mode=era, message_handler=handler) as globex:
            changes = ({"trip_id": "T-1"}, acme), ({"trip_id": "T-9"}, globex)
            if era == "legacy":
                for uri in uris:
                    await globex.subscribe_resource(uri)
                for trip_id, client in changes:
                    await client.call_tool("trips.touch", trip_id)
                with anyio.fail_after(10):
                    await updates.told.wait()
            else:
                async with globex.listen(resource_subscriptions=uris) as subscription:
                    for trip_id, client in changes:
                        await client.call_tool("trips.touch", trip_id)
                    with anyio.fail_after(10):
                        updates.uris.append((await anext(aiter(subscription))).uri)  # type: ignore[union-attr]
    # Told in order: had acme's change reached globex, it would have come first.
    assert updates.uris == ["trip://T-9"]


# -- subscriptions/listen (2026-07-28) ------------------------------------------------------


async def test_a_listen_stream_hears_of_changes_to_the_resources_it_asked_for(
    url: str,
) -> None:
    async with mcp_http_client(url, "ada-token", mode="auto") as client:
        async with client.listen(resource_subscriptions=["trip://T-1"]) as subscription:
            await client.call_tool("trips.touch", {"trip_id": "T-2"})
            await client.call_tool("trips.touch", {"trip_id": "T-1"})
            with anyio.fail_after(10):
                event = await anext(aiter(subscription))
    assert subscription.honored.resource_subscriptions == ["trip://T-1"]
    assert event == ResourceUpdated(uri="trip://T-1")


class Nothing(BaseModel):
    """No fields."""


async def test_a_listen_stream_hears_that_the_tool_list_changed() -> None:
    host = build_content_host()

    @tool(name="trips.extra", tier="read", required_scopes=("trips:read",))
    async def extra(_: Nothing) -> Nothing:
        """A tool that arrives while serving."""
        return Nothing()

    async with Client(create_server(host), mode="auto") as client:
        async with client.listen(tools_list_changed=True) as subscription:
            host.registry.register(extra)
            with anyio.fail_after(10):
                event = await anext(aiter(subscription))
    assert event == ToolsListChanged()


async def test_one_principal_cannot_hold_every_listen_stream() -> None:
    host = build_content_host()
    ada, gus = (create_server(host, principal=p) for p in (ADA, GUS))
    async with Client(ada, mode="auto") as flooding, Client(gus, mode="auto") as other:
        async with AsyncExitStack() as streams:
            for _ in range(16):
                await streams.enter_async_context(flooding.listen(tools_list_changed=True))
            with pytest.raises(MCPError) as refused:
                async with flooding.listen(tools_list_changed=True):
                    pass
            # Another principal, the same subject in another tenant, still listens.
            async with other.listen(tools_list_changed=True) as theirs:
                assert theirs.honored.tools_list_changed is True
        # Ended streams no longer count.
        async with flooding.listen(tools_list_changed=True) as again:
            assert again.honored.tools_list_changed is True
    assert refused.value.code == types.INVALID_REQUEST
    assert "16 listen streams" in refused.value.message
