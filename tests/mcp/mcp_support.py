"""Test support for the MCP transport: tools of every kind, principals, a live server.

Also the stdio entry point: ``python mcp_support.py`` serves the same tools on stdio as
``ALICE`` (the stdio end-to-end tests launch it as a subprocess).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from pydantic import BaseModel, Field
from tests.builders import destructive_risk, risk

from charter import (
    ActionPolicy,
    Deferred,
    ErrorCode,
    Interaction,
    InteractionRequired,
    Registry,
    Tool,
    ToolAnnotations,
    ToolContext,
    ToolError,
    tool,
)
from charter.auth import Principal, StaticAuthenticator
from charter.host import Host
from charter.mcp import Presenter
from live_server import serve as serve  # re-exported for this package's tests

ALICE = Principal(
    subject="alice",
    tenant_id="acme",
    scopes=frozenset({"trips:read", "trips:write"}),
    kind="agent",
)
"""The agent: may read and change trips."""
BOB = Principal(subject="bob", tenant_id="acme", scopes=frozenset({"charter:approve"}))
"""The approver."""
CAROL = Principal(subject="carol", tenant_id="acme", scopes=frozenset({"notes:read"}))
"""May call public tools and ``notes`` reads only."""

TOKENS = {"alice-token": ALICE, "bob-token": BOB, "carol-token": CAROL}
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
    "AAAABJRU5ErkJggg=="
)


@dataclass
class Probe:
    """What the handlers saw, for the tests to check."""

    runs: dict[str, int] = field(default_factory=dict)
    started: threading.Event = field(default_factory=threading.Event)
    saw_cancel: threading.Event = field(default_factory=threading.Event)
    resumes: list[Any] = field(default_factory=list)

    def ran(self, name: str) -> None:
        self.runs[name] = self.runs.get(name, 0) + 1


class Empty(BaseModel):
    """No arguments."""


class Address(BaseModel):
    """Where to go."""

    city: str
    country: str = Field(min_length=2, max_length=2)


class EchoIn(BaseModel):
    """Text to echo back."""

    text: str = Field(max_length=50)
    times: int = Field(default=1, ge=1, le=3)
    address: Address | None = None


class EchoOut(BaseModel):
    """The echoed text."""

    text: str
    times: int


class TripIn(BaseModel):
    """A trip."""

    trip_id: str


class TripOut(BaseModel):
    """What happened to the trip."""

    trip_id: str
    status: str


class FailIn(BaseModel):
    """The error to raise."""

    code: ErrorCode


class Picture(BaseModel):
    """An image."""

    data: str
    mime_type: str


class Answer(BaseModel):
    """What the user or the model said."""

    text: str


class Who(BaseModel):
    """Who called."""

    subject: str | None
    tenant_id: str


WRITE_RISK = risk("data-write")
DELETE_RISK = destructive_risk("data-delete")


def build_registry(probe: Probe) -> Registry:
    """Every kind of tool the MCP tests need."""
    registry = Registry()
    registry.register_all([*_plain_tools(probe), *_action_tools(probe), *_talking_tools(probe)])
    return registry


AnyTool = Tool[Any, Any, Any]


def _plain_tools(probe: Probe) -> list[AnyTool]:
    """Reads: public, scoped, audience-bound, failing, presented."""

    @tool(
        tier="read",
        auth="public",
        annotations=ToolAnnotations(title="Echo", idempotent_hint=True),
    )
    async def echo(args: EchoIn) -> EchoOut:
        """Echo text back."""
        probe.ran("echo")
        return EchoOut(text=args.text * args.times, times=args.times)

    @tool(tier="read", required_scopes=("trips:read",))
    def whoami(_: Empty, ctx: ToolContext) -> Who:
        """Say who is calling."""
        principal = ctx.principal
        return Who(subject=principal.subject if principal else None, tenant_id=ctx.tenant_id)

    @tool(tier="read", required_scopes=("notes:read",))
    def read_notes(_: Empty) -> Answer:
        """Read notes (only carol may)."""
        return Answer(text="notes")

    @tool(tier="read", audience=("partner",))
    def partner_report(_: Empty) -> Answer:
        """A report for partners only."""
        return Answer(text="partners")

    @tool(tier="read", auth="public")
    def fail(args: FailIn) -> Answer:
        """Fail with the given code."""
        raise ToolError(args.code, f"failing with {args.code.value} on purpose")

    @tool(tier="read", auth="public")
    def bad_output(_: Empty) -> EchoOut:
        """Return output that breaks the output schema."""
        return {"text": "no times"}  # type: ignore[return-value]

    @tool(tier="read", auth="public")
    def picture(_: Empty) -> Picture:
        """A red pixel."""
        return Picture(data=PNG, mime_type="image/png")

    @tool(tier="read", auth="public")
    def broken_picture(_: Empty) -> Picture:
        """A picture whose presenter fails."""
        return Picture(data="", mime_type="image/png")

    return [echo, whoami, read_notes, partner_report, fail, bad_output, picture, broken_picture]


def _action_tools(probe: Probe) -> list[AnyTool]:
    """Writes through the ledger: plain, confirmed, approved, deferred."""

    def trip_tool(name: str, status: str, description: str, **options: Any) -> AnyTool:
        """A ledgered ``trips:write`` tool that sets the trip's status to ``status``."""

        async def handler(args: TripIn) -> TripOut:
            probe.ran(name)
            return TripOut(trip_id=args.trip_id, status=status)

        options.update(name=name, description=description, required_scopes=("trips:write",))
        return tool(**options)(handler)

    def on_trip(**gates: Any) -> ActionPolicy:
        return ActionPolicy(target_type="trip", command_target_field="trip_id", **gates)

    rename_trip = trip_tool(
        "rename_trip",
        "renamed",
        "Rename a trip (ledgered: needs a requestId).",
        tier="write",
        risk_policy=WRITE_RISK,
    )
    cancel_trip = trip_tool(
        "cancel_trip",
        "cancelled",
        "Cancel a trip (needs the user's confirmation).",
        tier="sensitive",
        risk_policy=WRITE_RISK,
        action_policy=on_trip(confirmation="required"),
    )
    delete_trip = trip_tool(
        "delete_trip",
        "deleted",
        "Delete a trip (needs confirmation and an approver).",
        tier="destructive",
        risk_policy=DELETE_RISK,
        action_policy=on_trip(approval="required"),
    )

    @tool(tier="write", risk_policy=WRITE_RISK, required_scopes=("trips:write",))
    async def book_later(args: TripIn) -> TripOut | Deferred:
        """Book a trip; the booking completes in the background."""
        probe.ran("book_later")
        return Deferred(token={"trip": args.trip_id})

    return [rename_trip, cancel_trip, delete_trip, book_later]


def _talking_tools(probe: Probe) -> list[AnyTool]:
    """Tools that talk to the caller mid-call: cancellation, progress, logs, questions."""

    @tool(tier="read", auth="public")
    def wait_for_cancel(_: Empty, ctx: ToolContext) -> Answer:
        """A sync handler that blocks until its call is cancelled."""
        probe.started.set()
        if ctx.cancel.wait_sync(10):
            probe.saw_cancel.set()
        return Answer(text="done")

    @tool(tier="read", auth="public")
    async def count_up(_: Empty, ctx: ToolContext) -> Answer:
        """Report progress 1/3, 2/3, 3/3."""
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3, f"step {step}")
        return Answer(text="counted")

    @tool(tier="read", auth="public")
    async def chatty(_: Empty, ctx: ToolContext) -> Answer:
        """Log at debug, info and warning."""
        await ctx.log("debug", "debug detail")
        await ctx.log("info", "working", {"step": 1})
        await ctx.log("warning", "careful")
        return Answer(text="logged")

    @tool(tier="read", auth="public")
    def ask_name(_: Empty, ctx: ToolContext) -> Answer | InteractionRequired:
        """Ask the user their name, then greet them."""
        resume = ctx.resume
        if resume is None:
            return InteractionRequired(
                interaction=Interaction(
                    id="name-question",
                    kind="response",
                    prompt="What is your name?",
                    metadata={
                        "schema": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"],
                        }
                    },
                ),
                token={"asked": "name"},
            )
        probe.resumes.append(resume)
        if not resume.approved:
            return Answer(text="no name given")
        value = resume.value
        name = value.get("name") if isinstance(value, dict) else None
        return Answer(text=f"Hello {name}")

    @tool(tier="read", auth="public")
    async def ask_model(args: Answer, ctx: ToolContext) -> Answer:
        """Ask the caller's model."""
        sample = await ctx.sample(args.text, max_tokens=20, system_prompt="Be brief.")
        return Answer(text=f"{sample.text} ({sample.model})")

    return [wait_for_cancel, count_up, chatty, ask_name, ask_model]


def _picture(output: Mapping[str, Any]) -> list[types.ContentBlock]:
    return [
        types.ImageContent(
            type="image", data=str(output["data"]), mime_type=str(output["mime_type"])
        )
    ]


def _broken(output: Mapping[str, Any]) -> list[types.ContentBlock]:
    raise RuntimeError("presenter bug")


PRESENTERS: dict[str, Presenter] = {"picture": _picture, "broken_picture": _broken}


def build_host(probe: Probe, *, authenticated: bool = True) -> Host:
    """A host over the test tools; with the static token table unless told otherwise."""
    return Host(
        build_registry(probe),
        authenticator=StaticAuthenticator(TOKENS) if authenticated else None,
    )


def text_of(result: types.CallToolResult) -> str:
    """The text of a tool result's first content block (which must be text)."""
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def error_text(result: types.CallToolResult, start: str) -> str:
    """The text of a tool error result, which must begin with ``start`` (``"[CODE]"``)."""
    assert result.is_error is True
    text = text_of(result)
    assert text.startswith(start), text
    return text


class Logs:
    """The log notifications a client received, in order: pass it as ``logging_callback``."""

    def __init__(self) -> None:
        self.received: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.received.append(params)

    @property
    def levels(self) -> list[str]:
        return [params.level for params in self.received]

    @property
    def data(self) -> list[Any]:
        return [params.data for params in self.received]


def request_id() -> str:
    """A fresh ``_charter.requestId``."""
    return str(uuid.uuid4())


def main() -> None:
    """Serve the test tools on stdio as ``ALICE`` (for the stdio end-to-end tests)."""
    from charter.mcp import serve_stdio

    anyio.run(serve_stdio, build_host(Probe(), authenticated=False), ALICE)


if __name__ == "__main__":
    main()
