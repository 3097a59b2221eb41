"""The wire shapes of ``/v1/resources`` and ``/v1/prompts`` (camelCase, like MCP's)."""

from __future__ import annotations

import base64
from typing import Literal

from charter.resources import (
    BlobContents,
    Prompt,
    PromptContent,
    PromptImage,
    PromptResource,
    PromptResult,
    PromptText,
    Resource,
    ResourceContents,
    ResourceRead,
)

from ._wire import WireModel

__all__ = (
    "PromptListBody",
    "PromptResultBody",
    "ResourceListBody",
    "ResourceReadBody",
)


class ResourceEntryBody(WireModel):
    """A resource the caller may read."""

    uri: str
    name: str
    title: str | None = None
    description: str
    mime_type: str


class ResourceTemplateEntryBody(WireModel):
    """A resource template the caller may read (RFC 6570 ``{variables}``)."""

    uri_template: str
    name: str
    title: str | None = None
    description: str
    mime_type: str


class ResourceListBody(WireModel):
    """The resources and resource templates the caller may read."""

    resources: list[ResourceEntryBody]
    resource_templates: list[ResourceTemplateEntryBody]

    @classmethod
    def of(cls, resources: list[Resource], templates: list[Resource]) -> ResourceListBody:
        """The listing of ``resources`` and ``templates``."""
        return cls(
            resources=[ResourceEntryBody(uri=r.uri, **r.described()) for r in resources],
            resource_templates=[
                ResourceTemplateEntryBody(uri_template=r.uri, **r.described()) for r in templates
            ],
        )


class ResourceContentsBody(WireModel):
    """One part of a resource: ``text``, or ``blob`` (base64)."""

    uri: str
    mime_type: str
    text: str | None = None
    blob: str | None = None

    @classmethod
    def of(cls, contents: ResourceContents) -> ResourceContentsBody:
        """The wire form of ``contents``."""
        if isinstance(contents, BlobContents):
            blob = base64.b64encode(contents.blob).decode("ascii")
            return cls(uri=contents.uri, mime_type=contents.mime_type, blob=blob)
        return cls(uri=contents.uri, mime_type=contents.mime_type, text=contents.text)


class ResourceReadBody(WireModel):
    """What reading a resource returned."""

    uri: str
    contents: list[ResourceContentsBody]

    @classmethod
    def of(cls, read: ResourceRead) -> ResourceReadBody:
        """The wire form of ``read``."""
        return cls(uri=read.uri, contents=[ResourceContentsBody.of(c) for c in read.contents])


class PromptArgumentBody(WireModel):
    """One argument of a prompt (a string)."""

    name: str
    description: str | None = None
    required: bool


class PromptEntryBody(WireModel):
    """A prompt the caller may get."""

    name: str
    title: str | None = None
    description: str
    arguments: list[PromptArgumentBody]


class PromptListBody(WireModel):
    """The prompts the caller may get."""

    prompts: list[PromptEntryBody]

    @classmethod
    def of(cls, prompts: list[Prompt]) -> PromptListBody:
        """The listing of ``prompts``."""
        return cls(
            prompts=[
                PromptEntryBody(
                    name=p.name,
                    title=p.title,
                    description=p.description,
                    arguments=[
                        PromptArgumentBody(
                            name=a.name, description=a.description, required=a.required
                        )
                        for a in p.arguments
                    ],
                )
                for p in prompts
            ]
        )


class PromptContentBody(WireModel):
    """What one message carries: ``text``, ``image``/``audio`` (base64 ``data``) or a resource."""

    type: Literal["text", "image", "audio", "resource"]
    text: str | None = None
    data: str | None = None
    mime_type: str | None = None
    resource: ResourceContentsBody | None = None

    @classmethod
    def of(cls, content: PromptContent) -> PromptContentBody:
        """The wire form of ``content``."""
        if isinstance(content, PromptText):
            return cls(type="text", text=content.text)
        if isinstance(content, PromptResource):
            return cls(type="resource", resource=ResourceContentsBody.of(content.resource))
        data = base64.b64encode(content.data).decode("ascii")
        kind: Literal["image", "audio"] = "image" if isinstance(content, PromptImage) else "audio"
        return cls(type=kind, data=data, mime_type=content.mime_type)


class PromptMessageBody(WireModel):
    """One message of a prompt."""

    role: Literal["user", "assistant"]
    content: PromptContentBody


class PromptResultBody(WireModel):
    """What getting a prompt returned."""

    name: str
    description: str | None = None
    messages: list[PromptMessageBody]

    @classmethod
    def of(cls, result: PromptResult) -> PromptResultBody:
        """The wire form of ``result``."""
        return cls(
            name=result.name,
            description=result.description,
            messages=[
                PromptMessageBody(role=m.role, content=PromptContentBody.of(m.content))
                for m in result.messages
            ],
        )
