"""The tools of the official MCP conformance suite's server scenarios, as charter tools.

Built only from charter's public API (and MCP content types for the presenters). Run
it with ``python -m examples.conformance --port 8000`` and point the suite at
``http://127.0.0.1:8000/mcp``; ``scripts/conformance`` does both.

Each tool returns typed data. How the data looks on the wire (an image, audio, an
embedded resource) is the MCP adapter's business, through per-tool presenters.
Elicitation is a ``response`` interaction the adapter turns into ``elicitation/create``;
sampling goes through ``ctx.sample``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import mcp.types as types
from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette

from charter import (
    ErrorCode,
    Interaction,
    InteractionRequired,
    Registry,
    ToolContext,
    ToolError,
    tool,
)
from charter.host import Host
from charter.mcp import Presenter, Resumability, create_asgi_app
from charter.resources import (
    PromptImage,
    PromptMessage,
    PromptResource,
    PromptText,
    TextContents,
    prompt,
    resource,
)

# A 1x1 red PNG and a 1-sample silent WAV: the smallest valid media the suite accepts.
RED_PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
    "AAAABJRU5ErkJggg=="
)
SILENT_WAV = base64.b64encode(
    b"RIFF"
    + (38).to_bytes(4, "little")
    + b"WAVEfmt "
    + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little")  # PCM
    + (1).to_bytes(2, "little")  # mono
    + (8000).to_bytes(4, "little")
    + (16000).to_bytes(4, "little")
    + (2).to_bytes(2, "little")
    + (16).to_bytes(2, "little")
    + b"data"
    + (2).to_bytes(4, "little")
    + b"\x00\x00"
).decode()


class NoInput(BaseModel):
    """A tool without arguments."""


class Text(BaseModel):
    """A text answer."""

    text: str


class Media(BaseModel):
    """An image or audio clip."""

    data: str = Field(description="Base64-encoded bytes.")
    mime_type: str


class Resource(BaseModel):
    """A text resource."""

    uri: str
    mime_type: str
    text: str


class Mixed(BaseModel):
    """Text, an image and a resource."""

    text: str
    image: Media
    resource: Resource


class Done(BaseModel):
    """What the tool did."""

    message: str


class SamplingInput(BaseModel):
    """A prompt for the caller's model."""

    prompt: str = Field(description="The prompt to send to the caller's model.")


class ElicitationInput(BaseModel):
    """What to ask the user."""

    message: str = Field(description="The message to show the user.")


# Lower-case on purpose: the scenario expects the schema definition "$defs": {"address": ...}.
class address(BaseModel):
    """A postal address."""

    street: str | None = None
    city: str | None = None


class SchemaInput(BaseModel):
    """A name and an address."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    # Aliased so the field can share the name of its model's schema definition.
    home: address | None = Field(default=None, alias="address")


@tool(tier="read", auth="public")
def test_simple_text(_: NoInput) -> Text:
    """Returns a simple text response."""
    return Text(text="This is a simple text response for testing.")


@tool(tier="read", auth="public")
def test_image_content(_: NoInput) -> Media:
    """Returns a 1x1 red PNG image."""
    return Media(data=RED_PIXEL_PNG, mime_type="image/png")


@tool(tier="read", auth="public")
def test_audio_content(_: NoInput) -> Media:
    """Returns a tiny WAV audio clip."""
    return Media(data=SILENT_WAV, mime_type="audio/wav")


@tool(tier="read", auth="public")
def test_embedded_resource(_: NoInput) -> Resource:
    """Returns an embedded text resource."""
    return Resource(
        uri="test://embedded-resource",
        mime_type="text/plain",
        text="This is an embedded resource content.",
    )


@tool(tier="read", auth="public")
def test_multiple_content_types(_: NoInput) -> Mixed:
    """Returns text, an image and an embedded resource together."""
    return Mixed(
        text="Multiple content types test:",
        image=Media(data=RED_PIXEL_PNG, mime_type="image/png"),
        resource=Resource(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text=json.dumps({"test": "data", "value": 123}),
        ),
    )


@tool(tier="read", auth="public")
async def test_tool_with_logging(_: NoInput, ctx: ToolContext) -> Done:
    """Sends three info log messages while it runs."""
    await ctx.log("info", "Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.log("info", "Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.log("info", "Tool execution completed")
    return Done(message="Logged three messages.")


@tool(tier="read", auth="public")
def test_error_handling(_: NoInput) -> Done:
    """Always fails."""
    # A server fault: a client reads "[PROVIDER_ERROR]" and an error id; this text is logged.
    raise ToolError(
        ErrorCode.PROVIDER_ERROR,
        "This tool intentionally returns an error for testing",
        next_steps=("This tool always fails; there is nothing to fix.",),
    )


@tool(tier="read", auth="public")
async def test_reconnection(_: NoInput) -> Text:
    """Answers after a moment: long enough for the server to close the SSE stream (polling)."""
    await asyncio.sleep(0.5)
    return Text(text="Reconnection test completed successfully")


@tool(tier="read", auth="public")
async def test_tool_with_progress(_: NoInput, ctx: ToolContext) -> Done:
    """Reports progress 0, 50 and 100 of 100."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100)
        if step < 100:
            await asyncio.sleep(0.05)
    return Done(message="Progress reported.")


@tool(tier="read", auth="public")
async def test_sampling(args: SamplingInput, ctx: ToolContext) -> Text:
    """Asks the caller's model to answer a prompt."""
    answer = await ctx.sample(args.prompt, max_tokens=100)
    return Text(text=f"LLM response: {answer.text}")


def _ask(interaction_id: str, prompt: str, schema: Mapping[str, Any]) -> InteractionRequired:
    return InteractionRequired(
        interaction=Interaction(
            id=interaction_id, kind="response", prompt=prompt, metadata={"schema": dict(schema)}
        )
    )


def _answered(ctx: ToolContext, interaction_id: str, label: str) -> Text | None:
    resume = ctx.resume
    if resume is None or resume.interaction_id != interaction_id:
        return None
    action = "accept" if resume.approved else "decline"
    return Text(text=f"{label}: action={action}, content={json.dumps(resume.value)}")


USER_INFO_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


@tool(tier="read", auth="public")
def test_elicitation(args: ElicitationInput, ctx: ToolContext) -> Text | InteractionRequired:
    """Asks the user for a username and an email address."""
    return _answered(ctx, "user-info", "User response") or _ask(
        "user-info", args.message, USER_INFO_SCHEMA
    )


DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
}


@tool(tier="read", auth="public")
def test_elicitation_sep1034_defaults(_: NoInput, ctx: ToolContext) -> Text | InteractionRequired:
    """Asks the user a form whose fields all have defaults (SEP-1034)."""
    return _answered(ctx, "defaults", "Elicitation completed") or _ask(
        "defaults", "Please review your profile", DEFAULTS_SCHEMA
    )


def _titled(values: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in values]


ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": _titled(
                [("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third")]
            ),
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": _titled(
                    [("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third")]
                )
            },
        },
    },
}


@tool(tier="read", auth="public")
def test_elicitation_sep1330_enums(_: NoInput, ctx: ToolContext) -> Text | InteractionRequired:
    """Asks the user a form with every kind of enum (SEP-1330)."""
    return _answered(ctx, "enums", "Elicitation completed") or _ask(
        "enums", "Please pick your options", ENUMS_SCHEMA
    )


@tool(tier="read", auth="public")
def json_schema_2020_12_tool(args: SchemaInput) -> Text:
    """Tool with JSON Schema 2020-12 features."""
    return Text(text=f"Hello {args.name or 'stranger'}")


Kind = Literal["image", "audio"]


def _media(kind: Kind) -> Presenter:
    def present(output: Mapping[str, Any]) -> list[types.ContentBlock]:
        data, mime = str(output["data"]), str(output["mime_type"])
        if kind == "image":
            return [types.ImageContent(type="image", data=data, mime_type=mime)]
        return [types.AudioContent(type="audio", data=data, mime_type=mime)]

    return present


def _resource(output: Mapping[str, Any]) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(
            uri=str(output["uri"]), mime_type=str(output["mime_type"]), text=str(output["text"])
        ),
    )


def _text(output: Mapping[str, Any]) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=str(output["text"]))]


def _mixed(output: Mapping[str, Any]) -> list[types.ContentBlock]:
    image = output["image"]
    assert isinstance(image, Mapping)
    resource = output["resource"]
    assert isinstance(resource, Mapping)
    return [*_text(output), *_media("image")(image), _resource(resource)]


PRESENTERS: dict[str, Presenter] = {
    "test_simple_text": _text,
    "test_reconnection": _text,
    "test_image_content": _media("image"),
    "test_audio_content": _media("audio"),
    "test_embedded_resource": lambda output: [_resource(output)],
    "test_multiple_content_types": _mixed,
    "test_sampling": _text,
    "test_elicitation": _text,
    "test_elicitation_sep1034_defaults": _text,
    "test_elicitation_sep1330_enums": _text,
}


# -- resources and prompts (resources-*, prompts-*, completion-complete) ---------------------
# The suite's client is anonymous, so these are public, like the tools.


@resource("test://static-text", auth="public")
def static_text() -> str:
    """A fixed text resource."""
    return "This is the content of the static text resource."


@resource("test://static-binary", auth="public", mime_type="image/png")
def static_binary() -> bytes:
    """A fixed binary resource (a 1x1 PNG)."""
    return base64.b64decode(RED_PIXEL_PNG)


class TemplateId(BaseModel):
    """The variable of ``test://template/{id}/data``."""

    id: str = Field(max_length=64)


@resource("test://template/{id}/data", auth="public", mime_type="application/json")
def template_data(params: TemplateId) -> str:
    """Data for one id, read through a resource template."""
    return json.dumps({"id": params.id, "templateTest": True, "data": f"Data for ID: {params.id}"})


@resource("test://watched-resource", auth="public")
def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


@prompt(auth="public")
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


class TwoArgs(BaseModel):
    """The arguments of ``test_prompt_with_arguments``."""

    arg1: str = Field(description="First test argument")
    arg2: str = Field(description="Second test argument")


def _complete_arg1(typed: str, ctx: ToolContext) -> list[str]:
    return [v for v in ("testValue1", "testValue2", "other") if v.startswith(typed)]


@prompt(auth="public", complete={"arg1": _complete_arg1})
def test_prompt_with_arguments(args: TwoArgs) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{args.arg1}', arg2='{args.arg2}'"


class ResourceArg(BaseModel):
    """The argument of ``test_prompt_with_embedded_resource``."""

    resourceUri: str = Field(description="URI of the resource to embed", max_length=200)


@prompt(auth="public")
def test_prompt_with_embedded_resource(args: ResourceArg) -> list[PromptMessage]:
    """A prompt that embeds a resource."""
    embedded = TextContents(uri=args.resourceUri, text="Embedded resource content for testing.")
    return [
        PromptMessage(role="user", content=PromptResource(resource=embedded)),
        PromptMessage(
            role="user", content=PromptText(text="Please process the embedded resource above.")
        ),
    ]


@prompt(auth="public")
def test_prompt_with_image() -> list[PromptMessage]:
    """A prompt with an image."""
    image = PromptImage(data=base64.b64decode(RED_PIXEL_PNG), mime_type="image/png")
    return [
        PromptMessage(role="user", content=image),
        PromptMessage(role="user", content=PromptText(text="Please analyze the image above.")),
    ]


def build_host() -> Host:
    """A host with every conformance tool; no authenticator, so callers are anonymous."""
    registry = Registry()
    registry.register_all(
        [
            test_simple_text,
            test_image_content,
            test_audio_content,
            test_embedded_resource,
            test_multiple_content_types,
            test_tool_with_logging,
            test_error_handling,
            test_tool_with_progress,
            test_reconnection,
            test_sampling,
            test_elicitation,
            test_elicitation_sep1034_defaults,
            test_elicitation_sep1330_enums,
            json_schema_2020_12_tool,
        ]
    )
    registry.register_content(
        static_text,
        static_binary,
        template_data,
        watched_resource,
        test_simple_prompt,
        test_prompt_with_arguments,
        test_prompt_with_embedded_resource,
        test_prompt_with_image,
    )
    return Host(registry)


def build_app() -> Starlette:
    """The streamable HTTP app the suite talks to, at ``/mcp``."""
    # SSE polling (server-sse-polling): a call still running after 0.1 s has its stream
    # closed; the client resumes it with Last-Event-ID from the in-memory event store.
    return create_asgi_app(
        build_host(),
        name="charter-conformance",
        presenters=PRESENTERS,
        resumability=Resumability(poll_after=0.1),
    )


def main() -> None:
    """Serve the conformance tools on 127.0.0.1."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(build_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
