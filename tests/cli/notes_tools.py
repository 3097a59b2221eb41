"""The notes tools the `charter` tests serve: a read, and a write the user confirms first.

``cli_support`` builds its in-process host on ``Note`` and ``echo``; the `charter serve`
tests serve this module itself (its source, written under a fresh name), so it imports
nothing but charter and pydantic.
"""

from pydantic import BaseModel

from charter import Registry, RiskPolicy, tool


class Note(BaseModel):
    text: str


@tool(tier="read", name="notes.echo", required_scopes=["notes:read"])
def echo(args: Note) -> Note:
    """Say the text back."""
    return args


@tool(
    tier="sensitive",
    name="notes.publish",
    required_scopes=["notes:write"],
    risk_policy=RiskPolicy(
        destructive=False,
        reversible=False,
        dry_run_supported=False,
        confirmation_required=True,
        side_effects=("data-write",),
    ),
)
def publish(args: Note) -> Note:
    """Publish a note; the user confirms first."""
    return args


registry = Registry()
registry.register_all([echo, publish])
