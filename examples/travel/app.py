"""Wire the travel back office: registry, context, host, demo tenants and API keys."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from charter import Host, InvocationControls, Principal, RegisteredTool, Registry
from charter.approval_tools import approval_tools
from charter.store import ApiKeyAuthenticator, SqlStore

from .content import CONTENT
from .db import MemoryService, PaymentProvider, TripService, create_tables, seed_demo_data
from .tools import TOOLS, TravelContext, payment_effects

DEMO_KEYS_FILE = Path(".charter/demo-keys.json")
"""Where the demo's API keys are kept after the first run (a local, git-ignored file);
the environment variable ``CHARTER_DEMO_KEYS`` names another file."""


def demo_keys_file() -> Path:
    """The demo keys file: ``$CHARTER_DEMO_KEYS``, else ``.charter/demo-keys.json``."""
    return Path(os.environ.get("CHARTER_DEMO_KEYS") or DEMO_KEYS_FILE)


DEMO_PRINCIPALS: tuple[dict[str, Any], ...] = (
    {
        "role": "traveller-agent",
        "tenant_id": "acme",
        "subject": "agent-ada",
        "kind": "agent",
        "scopes": [
            "trips:read",
            "trips:write",
            "bookings:refund",
            "memories:read",
            "memories:write",
            "memories:delete",
        ],
    },
    {
        "role": "staff-approver",
        "tenant_id": "acme",
        "subject": "staff-sam",
        "kind": "person",
        "scopes": ["trips:read", "charter:approve"],
    },
    {
        "role": "admin",
        "tenant_id": "acme",
        "subject": "ops-olga",
        "kind": "person",
        "scopes": ["admin"],
    },
    {
        "role": "globex-agent",
        "tenant_id": "globex",
        "subject": "agent-gus",
        "kind": "agent",
        "scopes": ["trips:read", "trips:write"],
    },
)


def build_registry() -> Registry:
    """Register the travel tools, the trip resource template and the summary prompt.

    trips.rename is registered in two capability versions.
    """
    registry = Registry()
    registry.register_all(TOOLS)
    registry.register_content(*CONTENT)
    return registry


async def host(store: SqlStore) -> Host:
    """The host ``charter serve examples.travel:host`` runs: ``build_host`` plus demo keys.

    The demo API keys are created on first run and kept in ``demo_keys_file()``; print
    them with ``python -m examples.travel``.
    """
    travel = await build_host(store)
    await ensure_demo_keys(store)
    return travel


async def build_host(store: SqlStore) -> Host:
    """Build the travel host on an open store: tables, demo data, tools, effects, approvals.

    ``charter worker examples.travel:host`` delivers the refunds a crash or a provider
    outage left pending.
    """
    await create_tables(store.engine)
    await seed_demo_data(store.engine)
    # Reads outside a call go through the store's reader: on SQLite they then take no lock
    # and never queue behind the write lock a ledgered call holds.
    trips = TripService(store.reader)
    memories = MemoryService(store.reader)
    payments = PaymentProvider(store.engine)

    def context(
        principal: Principal | None, tool: RegisteredTool, controls: InvocationControls
    ) -> TravelContext:
        return TravelContext(
            trips=trips,
            memories=memories,
            payments=payments,
            resource_updated=lambda uri, tenant: travel.content.updated(uri, tenant_id=tenant),
        )

    def content_context(principal: Principal | None) -> TravelContext:
        return TravelContext(trips=trips, memories=memories, payments=payments)

    registry = build_registry()
    for registered in payment_effects(payments):
        registry.register_effect(registered)
    travel = Host(
        registry,
        store=store,
        authenticator=ApiKeyAuthenticator(store),
        context_factory=context,
        content_context=content_context,
    )
    registry.register_all(approval_tools(travel))
    return travel


async def ensure_demo_keys(store: SqlStore, path: Path | None = None) -> list[dict[str, Any]]:
    """Create the demo API keys on first run and keep them in ``path`` (mode 0600).

    Args:
        store: The open store the keys live in.
        path: The keys file; defaults to ``demo_keys_file()``. Keys it lists that the
            store does not know (a new database) are created again.
    """
    path = path if path is not None else demo_keys_file()
    if path.exists():
        keys: list[dict[str, Any]] = json.loads(path.read_text())
        known = {record.id for record in await store.list_api_keys()}
        if all(key["key_id"] in known for key in keys):
            return keys
    keys = []
    for spec in DEMO_PRINCIPALS:
        secret, record = await store.create_api_key(
            tenant_id=spec["tenant_id"],
            subject=spec["subject"],
            scopes=spec["scopes"],
            kind=spec["kind"],
            name=f"demo {spec['role']}",
        )
        keys.append({**spec, "key_id": record.id, "key": secret})
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Created 0600, never readable by others even for a moment; an older file is narrowed.
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        file.write(json.dumps(keys, indent=2) + "\n")
    path.chmod(0o600)
    return keys
