"""Resources and prompts shaped like the travel demo's, for the MCP and REST tests.

Two tenants hold trips with their own ids; agents in each read ``trip://{trip_id}``
(scope ``trips:read``), which resolves in the caller's tenant only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from pydantic import BaseModel, Field

from charter import ErrorCode, Registry, ToolContext, ToolError, tool
from charter.auth import Principal, StaticAuthenticator
from charter.host import Host
from charter.resources import Completer, PromptMessage, PromptText, prompt, resource

TRIPS = {
    "acme": {"T-1": "Lisbon offsite", "T-2": "Lima sales trip"},
    "globex": {"T-9": "Oslo board meeting"},
}

ADA = Principal(subject="ada", tenant_id="acme", scopes=frozenset({"trips:read"}), kind="agent")
"""An acme agent that may read trips."""
GUS = Principal(subject="ada", tenant_id="globex", scopes=frozenset({"trips:read"}), kind="agent")
"""A globex agent with the same subject as ADA."""
NEWT = Principal(subject="newt", tenant_id="acme", scopes=frozenset({"notes:read"}), kind="agent")
"""An acme agent without ``trips:read``."""
WILD = Principal(subject="wild", tenant_id="acme", scopes=frozenset({"trips:*"}), kind="agent")
"""An acme key with a wildcard grant."""
OLGA = Principal(subject="olga", tenant_id="acme", scopes=frozenset({"admin"}), kind="person")
"""The acme admin."""
TOKENS = {
    "ada-token": ADA,
    "gus-token": GUS,
    "newt-token": NEWT,
    "wild-token": WILD,
    "olga-token": OLGA,
}


class TripRef(BaseModel):
    """Which trip."""

    trip_id: str = Field(min_length=1, max_length=40, pattern=r"^T-\d+$")


class Trip(BaseModel):
    """A trip as a resource."""

    id: str
    name: str
    tenant: str


def _trip(ctx: ToolContext, trip_id: str) -> Trip:
    name = TRIPS.get(ctx.tenant_id, {}).get(trip_id)
    if name is None:
        raise ToolError(ErrorCode.NOT_FOUND, f"No trip {trip_id!r}.")
    return Trip(id=trip_id, name=name, tenant=ctx.tenant_id)


def _trip_ids(typed: str, ctx: ToolContext) -> list[str]:
    return sorted(t for t in TRIPS.get(ctx.tenant_id, {}) if t.startswith(typed))


class ReaderOptions(TypedDict):
    """The options ``@resource`` and ``@prompt`` share here."""

    required_scopes: Sequence[str]
    complete: Mapping[str, Completer]


TRIP_READER: ReaderOptions = {
    "required_scopes": ("trips:read",),
    "complete": {"trip_id": _trip_ids},
}
"""Who may read a trip, and how its ``trip_id`` argument completes."""


@resource("trip://{trip_id}", name="trip", title="A trip", **TRIP_READER)
async def trip(ref: TripRef, ctx: ToolContext) -> Trip:
    """One trip of the caller's tenant."""
    return _trip(ctx, ref.trip_id)


@resource("handbook://travel", name="handbook", auth="public")
def handbook() -> str:
    """The travel handbook, public."""
    return "Book economy under six hours."


@resource("logo://travel.png", name="logo", mime_type="image/png", auth="public")
def logo() -> bytes:
    """The logo (bytes)."""
    return b"\x89PNG\r\n\x1a\n"


@resource("audit://export", name="audit-export", auth="admin")
def audit_export() -> str:
    """Admins only."""
    return "everything"


class SummaryArgs(BaseModel):
    """What to summarise."""

    trip_id: str = Field(description="The trip to summarise.")
    tone: str | None = Field(default=None, description="How to say it.")


@prompt("trips.summary", title="Trip summary", **TRIP_READER)
def trip_summary(args: SummaryArgs, ctx: ToolContext) -> list[PromptMessage]:
    """Ask the model to summarise one trip."""
    found = _trip(ctx, args.trip_id)
    tone = f" in a {args.tone} tone" if args.tone else ""
    return [
        PromptMessage(role="user", content=PromptText(text=f"Summarise {found.name}{tone}.")),
    ]


class Touched(BaseModel):
    """The URI said to have changed."""

    uri: str


def build_content_host() -> Host:
    """A host with the trip resources and prompt and static tokens for the principals.

    Its ``trips.touch`` tool says a trip changed (``host.content.updated``), as a write
    tool of the domain would, on the server's own event loop.
    """
    registry = Registry()
    registry.register_content(trip, handbook, logo, audit_export, trip_summary)
    host = Host(registry, authenticator=StaticAuthenticator(TOKENS))

    @tool(name="trips.touch", tier="read", required_scopes=("trips:read",))
    async def touch(ref: TripRef, ctx: ToolContext) -> Touched:
        """Say that a trip of the caller's tenant changed."""
        uri = f"trip://{ref.trip_id}"
        await host.content.updated(uri, tenant_id=ctx.tenant_id)
        return Touched(uri=uri)

    registry.register(touch)
    return host
