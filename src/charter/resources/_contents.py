"""What reading a resource and getting a prompt return: typed contents and messages.

Plain pydantic models, so every transport renders the same values: MCP through the SDK's
types, REST as JSON. Binary data is bytes here and base64 on the wire.
"""

from __future__ import annotations

import base64
from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

__all__ = (
    "BlobContents",
    "PromptAudio",
    "PromptContent",
    "PromptImage",
    "PromptMessage",
    "PromptResource",
    "PromptResult",
    "PromptText",
    "ResourceContents",
    "ResourceRead",
    "TextContents",
)

Base64Bytes = Annotated[
    bytes, PlainSerializer(lambda b: base64.b64encode(b).decode("ascii"), return_type=str)
]
"""Bytes in Python, standard base64 text in JSON."""


class TextContents(BaseModel):
    """A resource's contents as text."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["text"] = "text"
    uri: str
    mime_type: str = "text/plain"
    text: str


class BlobContents(BaseModel):
    """A resource's contents as bytes (base64 on the wire)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["blob"] = "blob"
    uri: str
    mime_type: str = "application/octet-stream"
    blob: Base64Bytes


ResourceContents: TypeAlias = Annotated[TextContents | BlobContents, Field(discriminator="kind")]
"""One part of a read resource: text or bytes."""


class ResourceRead(BaseModel):
    """What reading one resource returned."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    uri: str
    contents: list[ResourceContents]


class PromptText(BaseModel):
    """Text in a prompt message."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["text"] = "text"
    text: str


class PromptImage(BaseModel):
    """An image in a prompt message."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["image"] = "image"
    data: Base64Bytes
    mime_type: str


class PromptAudio(BaseModel):
    """Audio in a prompt message."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["audio"] = "audio"
    data: Base64Bytes
    mime_type: str


class PromptResource(BaseModel):
    """A resource's contents embedded in a prompt message."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["resource"] = "resource"
    resource: ResourceContents


PromptContent: TypeAlias = Annotated[
    PromptText | PromptImage | PromptAudio | PromptResource, Field(discriminator="type")
]
"""What one prompt message carries."""


class PromptMessage(BaseModel):
    """One message of a prompt, said by the user or the assistant."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    role: Literal["user", "assistant"] = "user"
    content: PromptContent


class PromptResult(BaseModel):
    """What getting one prompt returned."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    description: str | None = None
    messages: list[PromptMessage]
