"""Define a tool, register it, dispatch it, and print its outcome and the manifest.

Run it with ``python -m examples.quickstart`` (``make run`` does).
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from charter import Registry, RiskPolicy, ToolContext, ToolError, tool


class Greeting(BaseModel):
    """Who to greet."""

    name: str = Field(min_length=1, description="The person's name.")


class Reply(BaseModel):
    """What the tool answers."""

    message: str


@tool(tier="read", required_scopes=["demo:read"])
async def greet(args: Greeting, ctx: ToolContext) -> Reply:
    """Greet someone by name."""
    return Reply(message=f"Hello, {args.name}, from tenant {ctx.tenant_id}!")


class Note(BaseModel):
    """A note to save."""

    text: str


class Saved(BaseModel):
    """The saved note's id."""

    note_id: str


@tool(
    tier="write",
    risk_policy=RiskPolicy(
        destructive=False, reversible=True, dry_run_supported=False, side_effects=("data-write",)
    ),
    required_scopes=["notes:write"],
)
def save_note(args: Note) -> Saved:
    """Save a note (a sync handler: it runs in a worker thread)."""
    if args.text.strip() == "":
        raise ToolError("INVALID_INPUT", "A note needs some text.")
    return Saved(note_id=f"note-{len(args.text)}")


def build_registry() -> Registry:
    """Register the example tools."""
    registry = Registry()
    registry.register_all([greet, save_note])
    return registry


async def main() -> None:
    """Dispatch a few calls and print what a caller would see."""
    registry = build_registry()
    ctx = ToolContext(tenant_id="demo")
    for name, arguments in [
        ("greet", {"name": "Ada"}),
        ("greet", {"name": ""}),
        ("save_note", {"text": "Buy milk"}),
        ("gret", {"name": "Ada"}),
    ]:
        outcome = await registry.dispatch(name, arguments, ctx)
        print(f"{name} {arguments} -> {outcome.model_dump_json(exclude_none=True)}")
    print(registry.manifest_json())
    registry.close()


if __name__ == "__main__":
    asyncio.run(main())
