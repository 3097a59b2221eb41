"""Which tenant a resource template is read for: the caller's, or the one ``tenant_param`` names.

The same subject in two tenants, an admin of one, and an anonymous reader of a public
template, each reading a ledger of its tenant by URI (``ledger://{tenant}/{entry}``).
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from charter import ErrorCode, Failed, Principal, Registry, ToolContext, resource
from charter.audit import MemoryAuditSink
from charter.host import Host
from charter.resources import ResourceRead, TextContents

pytestmark = pytest.mark.anyio

ADA = Principal(subject="ada", tenant_id="acme", scopes=frozenset({"ledger:read"}))
"""``ada`` of acme."""
ADA_GLOBEX = Principal(subject="ada", tenant_id="globex", scopes=frozenset({"ledger:read"}))
"""Another principal with ada's subject, in globex."""
OLGA = Principal(subject="olga", tenant_id="acme", scopes=frozenset({"ledger:read", "admin"}))
"""An admin of acme."""

ENTRIES = {"acme": {"E-1": "acme's rent"}, "globex": {"E-1": "globex's payroll"}}


class EntryRef(BaseModel):
    tenant: str
    entry: str


def _entry(ref: EntryRef, ctx: ToolContext) -> str:
    """One ledger entry."""
    # The handler reads the tenant the host decided, never the URI's variable itself.
    return ENTRIES.get(ctx.tenant_id, {}).get(ref.entry, "none")


own = resource("ledger://{tenant}/{entry}", tenant_param="tenant", required_scopes=["ledger:read"])(
    _entry
)
delegable = resource(
    "shared://{tenant}/{entry}",
    tenant_param="tenant",
    delegable=True,
    required_scopes=["ledger:read"],
)(_entry)
public = resource("public://{tenant}/{entry}", tenant_param="tenant", auth="public")(_entry)


def _host() -> tuple[Host, MemoryAuditSink]:
    registry = Registry()
    registry.register_content(own, delegable, public)
    sink = MemoryAuditSink()
    return Host(registry, audit=sink), sink


def _text(read: ResourceRead | Failed) -> str:
    assert isinstance(read, ResourceRead), read
    [contents] = read.contents
    assert isinstance(contents, TextContents), contents
    return contents.text


def _refused_as_another_tenants(read: ResourceRead | Failed) -> None:
    assert isinstance(read, Failed)
    assert read.code == ErrorCode.AUTHORIZATION_DENIED
    assert read.reason == "tenant_forbidden"


async def test_the_tenant_a_template_names_is_read_only_when_it_is_the_callers() -> None:
    host, _ = _host()
    assert _text(await host.content.read("ledger://acme/E-1", ADA)) == "acme's rent"
    assert _text(await host.content.read("ledger://globex/E-1", ADA_GLOBEX)) == "globex's payroll"
    # The same subject, the other tenant's URI: refused, whichever tenant asks.
    _refused_as_another_tenants(await host.content.read("ledger://globex/E-1", ADA))
    _refused_as_another_tenants(await host.content.read("ledger://acme/E-1", ADA_GLOBEX))
    # Not delegable: the admin scope does not reach another tenant either.
    _refused_as_another_tenants(await host.content.read("ledger://globex/E-1", OLGA))


async def test_an_admin_reads_another_tenants_delegable_template_audited_as_delegated() -> None:
    host, sink = _host()
    assert _text(await host.content.read("shared://globex/E-1", OLGA)) == "globex's payroll"
    _refused_as_another_tenants(await host.content.read("shared://globex/E-1", ADA))
    [refused, granted] = sorted(await sink.events(), key=lambda e: e.subject or "")
    assert (granted.subject, granted.tenant, granted.delegated) == ("olga", "globex", True)
    assert granted.principal_tenant == "acme"
    assert (refused.subject, refused.tenant, refused.delegated) == ("ada", "acme", False)


async def test_an_anonymous_reader_of_a_public_template_reads_the_tenant_it_names() -> None:
    # Documented in contract.md: an anonymous reader has no tenant to be held to, so a
    # public template with tenant_param is public for every tenant ...
    host, _ = _host()
    assert _text(await host.content.read("public://globex/E-1", None)) == "globex's payroll"
    assert _text(await host.content.read("public://acme/E-1", None)) == "acme's rent"
    # ... while a reader who sent credentials is held to its own tenant.
    assert _text(await host.content.read("public://acme/E-1", ADA)) == "acme's rent"
    _refused_as_another_tenants(await host.content.read("public://globex/E-1", ADA))
