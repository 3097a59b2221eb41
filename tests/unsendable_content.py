"""Resources, prompts and a tool whose handlers produce what no transport can send.

Shared by the MCP and REST tests of those failures (``test_mcp_content_failures``,
``test_http_content_failures``): text with an unpaired surrogate, a refusal quoting one,
and a resource echoing its decoded template variable.
"""

from __future__ import annotations

from pydantic import BaseModel

from charter import ErrorCode, Registry, ToolContext, ToolError, tool
from charter.auth import Principal, StaticAuthenticator
from charter.host import Host
from charter.resources import PromptMessage, PromptText, prompt, resource

ADA = Principal(subject="ada", tenant_id="acme", scopes=frozenset({"notes:read"}), kind="agent")
READER = ("notes:read",)


class PathRef(BaseModel):
    """Any path: the handler checks it (here it only echoes it)."""

    path: str


@resource("file://{path}", name="file", required_scopes=READER)
def echo_path(ref: PathRef) -> str:
    """The decoded variable, as the handler got it."""
    return ref.path


@resource("text://unsendable", name="unsendable", required_scopes=READER)
def unsendable() -> str:
    """Text with an unpaired surrogate, which UTF-8 cannot encode."""
    return "a\ud800b"


@resource("text://refused", name="refused", required_scopes=READER)
def refused() -> str:
    """A refusal whose own text cannot be encoded."""
    raise ToolError(ErrorCode.NOT_FOUND, "No note \udfff.")


class Topic(BaseModel):
    """What to write about."""

    topic: str
    tone: str | None = None


def _topics(typed: str, ctx: ToolContext) -> list[str]:
    return ["visas", "\ud800"]


@prompt("brief", required_scopes=READER, complete={"topic": _topics})
def brief(args: Topic) -> str:
    """Write a brief."""
    return f"Write about {args.topic}."


@prompt("garbled", required_scopes=READER)
def garbled(args: Topic) -> list[PromptMessage]:
    """A message with an unpaired surrogate."""
    return [PromptMessage(content=PromptText(text=f"{args.topic} \udfff"))]


class Listing(BaseModel):
    names: list[str]


@tool(tier="read", name="files.list", required_scopes=READER)
def list_files(args: PathRef) -> Listing:
    """Names as os.listdir gives bytes it cannot decode (surrogateescape)."""
    if args.path == "missing":
        raise ToolError(ErrorCode.NOT_FOUND, "No folder caf\udce9.")
    return Listing(names=["ok.txt", "caf\udce9.txt"])


def build_host() -> Host:
    registry = Registry()
    registry.register(list_files)
    registry.register_content(echo_path, unsendable, refused, brief, garbled)
    return Host(registry, authenticator=StaticAuthenticator({"ada-token": ADA}))
