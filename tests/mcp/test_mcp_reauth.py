"""Change notifications reach only callers whose credential still authenticates them.

uvicorn on 127.0.0.1, the SDK's client, and API keys in a SQLite ``SqlStore``: a key is
revoked in the store from another connection, as ``charter keys revoke`` does. The
authenticator's clock moves only when a test moves it, past the 5 s it remembers a
verified key for. Changes are announced by tool calls of a caller whose key stays valid,
on the server's own event loop.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import anyio.to_thread
import mcp.types as types
import pytest
from mcp.client import Client
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
from pydantic import BaseModel
from tests.builders import Clock, mcp_http_client

from charter import Registry, ToolContext, tool
from charter.auth import AuthenticationFailed, Authenticator, Credentials, Principal
from charter.host import Host
from charter.mcp import create_asgi_app
from charter.store import ApiKeyAuthenticator, ApiKeyRecord, SqlStore, StoreUnavailable, sqlite_url
from content_support import ADA, TripRef, handbook, trip
from live_server import serve

pytestmark = [
    pytest.mark.anyio,
    # resources/subscribe is handshake-era; the SDK client warns that 2026-07-28 drops it.
    pytest.mark.filterwarnings(
        "ignore:resources/.*subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning"
    ),
]

PAST_KEY_MEMORY = timedelta(seconds=6)
"""Past what ``ApiKeyAuthenticator`` remembers a verified key for (5 s by default)."""
NEGATIVE_WAIT = 0.5
"""How long a test waits for a notification that must not come, once the server has sent
what it sends (the announcing call has returned and a valid subscriber was told)."""
_BOTH_ERAS = pytest.mark.parametrize("era", ["legacy", "auto"], ids=["subscribe", "listen"])
"""Handshake-era ``resources/subscribe`` and 2026-07-28 ``subscriptions/listen``."""


class Keys:
    """The store's key look-ups, which a test can take down (a store outage)."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.down = False

    async def verify_api_key(self, presented: str, *, now: datetime) -> ApiKeyRecord | None:
        if self.down:
            raise StoreUnavailable("the key store is down (the test's outage)")
        return await self.store.verify_api_key(presented, now=now)


class Counting:
    """An ``Authenticator`` that counts each bearer token's checks, begun and ended."""

    def __init__(self, inner: Authenticator) -> None:
        self.inner = inner
        self.checks: Counter[str | None] = Counter()
        self.ended: Counter[str | None] = Counter()
        self._changed = threading.Condition()  # the server runs in another thread

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        self.checks[credentials.bearer] += 1
        try:
            return await self.inner.authenticate(credentials)
        finally:
            with self._changed:
                self.ended[credentials.bearer] += 1
                self._changed.notify_all()

    def wait_for(self, token: str, ended: int) -> bool:
        """Wait (blocking, up to 10 s) until ``token``'s checks that ended reach ``ended``."""
        with self._changed:
            return self._changed.wait_for(lambda: self.ended[token] >= ended, 10)


class Table:
    """An ``Authenticator`` over a table the test edits: a principal whose scopes change."""

    def __init__(self, tokens: dict[str, Principal]) -> None:
        self.tokens = tokens

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        if credentials.bearer is None:
            return None
        found = self.tokens.get(credentials.bearer)
        if found is None:
            raise AuthenticationFailed("the credentials are not valid")
        return found


class Touch(BaseModel):
    """Which resources changed."""

    uris: list[str]


class Nothing(BaseModel):
    """No fields."""


class NewTool(BaseModel):
    """The name of a tool to add."""

    name: str


def build_host(authenticator: Authenticator, store: SqlStore | None = None) -> Host:
    """Trips and the handbook, a tool that announces changes and one that adds a tool."""
    registry = Registry()
    registry.register_content(trip, handbook)
    host = Host(registry, store=store, authenticator=authenticator)

    @tool(name="resources.touch", tier="read", required_scopes=("trips:read",))
    async def touch(args: Touch, ctx: ToolContext) -> Nothing:
        """Say that resources of the caller's tenant changed, one after the other."""
        for uri in args.uris:
            await host.content.updated(uri, tenant_id=ctx.tenant_id)
        return Nothing()

    @tool(name="tools.grow", tier="read", required_scopes=("trips:read",))
    async def grow(args: NewTool) -> Nothing:
        """Register one more tool while serving, as the gateway does."""

        @tool(name=args.name, tier="read", required_scopes=("trips:read",))
        async def extra(_: TripRef) -> Nothing:
            """A tool that arrives while serving."""
            return Nothing()

        registry.register(extra)
        return Nothing()

    registry.register_all([touch, grow])
    return host


@dataclass
class Served:
    """A live server over API keys in a SQLite file, and the parts a test moves."""

    url: str
    db: str
    clock: Clock
    keys: Keys
    authenticator: Counting

    async def key(self, subject: str) -> tuple[str, str]:
        """A new acme agent key that may read trips: (the key, its id)."""
        async with SqlStore(self.db) as store:
            key, record = await store.create_api_key(
                tenant_id="acme", subject=subject, scopes=["trips:read"], kind="agent"
            )
        return key, record.id

    async def revoke(self, key_id: str) -> None:
        """Revoke in the store, then let the authenticator's memory of the key lapse."""
        async with SqlStore(self.db) as store:
            assert await store.revoke_api_key(key_id)
        self.clock.advance(PAST_KEY_MEMORY)

    async def until_checked(self, token: str, ended: int) -> None:
        """Wait until ``token``'s checks that ended reach ``ended``."""
        assert await anyio.to_thread.run_sync(self.authenticator.wait_for, token, ended)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    db = sqlite_url(tmp_path / "charter.db")
    clock = Clock()
    store = SqlStore(db)  # opened by the app's lifespan
    keys = Keys(store)
    authenticator = Counting(ApiKeyAuthenticator(keys, clock=clock))
    with serve(create_asgi_app(build_host(authenticator, store))) as base:
        yield Served(base + "/mcp", db, clock, keys, authenticator)


TOOLS_CHANGED = "tools/list_changed"


class Told:
    """A session's message handler that keeps the change notifications it gets: the URI of
    each resource update, ``TOOLS_CHANGED`` for a tool-list change."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.updated = anyio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self.updated.set()
        elif isinstance(message, types.ToolListChangedNotification):
            self.uris.append(TOOLS_CHANGED)
            self.updated.set()


async def touch(client: Client, *uris: str) -> None:
    """Announce, through ``client``'s tool call, that ``uris`` changed (in that order)."""
    result = await client.call_tool("resources.touch", {"uris": list(uris)})
    assert not result.is_error


async def add_tool(client: Client, name: str) -> None:
    """Register a tool named ``name`` while serving, through ``client``'s tool call."""
    result = await client.call_tool("tools.grow", {"name": name})
    assert not result.is_error


async def to_the_end(subscription: AsyncIterator[object]) -> list[object]:
    """Every event of a listen stream until it ends gracefully (within 10 s)."""
    with anyio.fail_after(10):
        return [event async for event in subscription]


class Follower:
    """A caller that follows resources as its era does: ``resources/subscribe`` (handshake
    era, ``legacy``) or a ``subscriptions/listen`` stream (2026-07-28, ``auto``)."""

    def __init__(self, era: str) -> None:
        self.era = era
        self.told = Told()
        self._stream: AsyncIterator[object] | None = None

    @property
    def handler(self) -> Told | None:
        """The client's message handler (handshake-era notifications come through it)."""
        return self.told if self.era == "legacy" else None

    async def follow(self, client: Client, uris: list[str], stack: AsyncExitStack) -> None:
        if self.era == "legacy":
            for uri in uris:
                await client.subscribe_resource(uri)
        else:
            self._stream = aiter(
                await stack.enter_async_context(client.listen(resource_subscriptions=uris))
            )

    async def next_change(self) -> list[str]:
        """Wait (10 s at most) for the next change; every URI the caller was told of so far."""
        with anyio.fail_after(10):
            if self._stream is None:
                await self.told.updated.wait()
                self.told.updated = anyio.Event()
            else:
                event = await anext(self._stream)
                assert isinstance(event, ResourceUpdated)
                self.told.uris.append(event.uri)
        return self.told.uris


# -- revoked keys ----------------------------------------------------------------------------


@pytest.mark.parametrize("change", ["resource", "tools"])
async def test_a_session_whose_key_was_revoked_is_not_told_of_changes(
    served: Served, change: str
) -> None:
    revoked_key, revoked_id = await served.key("ada")
    valid_key, _ = await served.key("bob")
    revoked, valid = Told(), Told()
    async with (
        mcp_http_client(served.url, revoked_key, mode="legacy", message_handler=revoked) as ada,
        mcp_http_client(served.url, valid_key, mode="legacy", message_handler=valid) as bob,
    ):
        for client in (ada, bob):
            await client.subscribe_resource("trip://T-1")
            await client.list_tools()  # a session that listed tools hears when they change
        await served.revoke(revoked_id)

        async def announce(tool_name: str) -> None:
            valid.updated = anyio.Event()
            if change == "resource":
                await touch(bob, "trip://T-1")
            else:
                await add_tool(bob, tool_name)
            with anyio.fail_after(10):
                await valid.updated.wait()

        await announce("trips.extra1")
        # The revoked session was forgotten: its key is not even checked again.
        checks = served.authenticator.checks[revoked_key]
        await announce("trips.extra2")
        assert served.authenticator.checks[revoked_key] == checks
        with anyio.move_on_after(NEGATIVE_WAIT):
            await revoked.updated.wait()
    assert revoked.uris == []
    heard = "trip://T-1" if change == "resource" else TOOLS_CHANGED
    assert valid.uris == [heard, heard]  # a key that works keeps being told


@pytest.mark.parametrize("change", ["resource", "tools"])
async def test_a_listen_stream_whose_key_was_revoked_ends_without_the_event(
    served: Served, change: str
) -> None:
    revoked_key, revoked_id = await served.key("ada")
    valid_key, _ = await served.key("bob")
    uris = ["trip://T-1"]
    async with (
        mcp_http_client(served.url, revoked_key, mode="auto") as ada,
        mcp_http_client(served.url, valid_key, mode="auto") as bob,
        ada.listen(resource_subscriptions=uris, tools_list_changed=True) as revoked,
        bob.listen(resource_subscriptions=uris, tools_list_changed=True) as valid,
    ):
        await served.revoke(revoked_id)
        if change == "resource":
            await touch(bob, "trip://T-1")
        else:
            await add_tool(bob, "trips.extra")
        with anyio.fail_after(10):
            heard = await anext(aiter(valid))
        ended_after = await to_the_end(revoked)
    assert ended_after == []
    assert heard == (
        ResourceUpdated(uri="trip://T-1") if change == "resource" else ToolsListChanged()
    )


# -- a key that cannot be checked now --------------------------------------------------------


@_BOTH_ERAS
async def test_nothing_is_sent_while_a_key_cannot_be_checked_and_the_subscription_stays(
    served: Served, era: str
) -> None:
    key, _ = await served.key("ada")
    announcer, _ = await served.key("bob")
    follower = Follower(era)
    async with (
        mcp_http_client(served.url, key, mode=era, message_handler=follower.handler) as ada,
        mcp_http_client(served.url, announcer, mode=era) as bob,
        AsyncExitStack() as stack,
    ):
        await follower.follow(ada, ["trip://T-1", "trip://T-2"], stack)
        served.clock.advance(PAST_KEY_MEMORY)
        await bob.list_tools()  # bob's key is checked now, and remembered through the outage
        served.keys.down = True
        checked = served.authenticator.ended[key]
        await touch(bob, "trip://T-1")
        # ada's key is checked in vain (a listen stream checks it after the call returned).
        await served.until_checked(key, checked + 1)
        served.keys.down = False
        await touch(bob, "trip://T-2")
        # In order on one stream: had T-1's change been sent, it would have come first.
        assert await follower.next_change() == ["trip://T-2"]


# -- scopes as they are now ------------------------------------------------------------------


@_BOTH_ERAS
async def test_a_caller_whose_scopes_shrank_is_told_only_of_what_it_may_still_read(
    era: str,
) -> None:
    table = Table({"ada-token": ADA, "bob-token": dataclasses.replace(ADA, subject="bob")})
    follower = Follower(era)
    uris = ["trip://T-1", "handbook://travel"]
    with serve(create_asgi_app(build_host(table))) as base:
        async with (
            mcp_http_client(
                base + "/mcp", "ada-token", mode=era, message_handler=follower.handler
            ) as ada,
            mcp_http_client(base + "/mcp", "bob-token", mode=era) as bob,
            AsyncExitStack() as stack,
        ):
            await follower.follow(ada, uris, stack)
            # The same principal, its trips:read grant withdrawn.
            table.tokens["ada-token"] = dataclasses.replace(ADA, scopes=frozenset({"notes:read"}))
            await touch(bob, *uris)
            assert await follower.next_change() == ["handbook://travel"]


# -- how often ---------------------------------------------------------------------------------


async def test_a_burst_of_changes_checks_a_listeners_key_once(served: Served) -> None:
    key, _ = await served.key("ada")
    announcer, _ = await served.key("bob")
    async with (
        mcp_http_client(served.url, key, mode="auto") as ada,
        mcp_http_client(served.url, announcer, mode="auto") as bob,
        ada.listen(resource_subscriptions=["trip://T-1", "trip://T-2"]) as stream,
    ):
        checks = served.authenticator.checks[key]
        await touch(bob, "trip://T-1", "trip://T-2")
        with anyio.fail_after(10):
            heard = [await anext(aiter(stream)) for _ in range(2)]
    assert heard == [ResourceUpdated(uri="trip://T-1"), ResourceUpdated(uri="trip://T-2")]
    assert served.authenticator.checks[key] == checks + 1


async def test_a_session_made_with_an_x_api_key_is_checked_again_and_its_revoked_key_told_nothing(
    served: Served,
) -> None:
    # /mcp reads X-API-Key as REST does (charter._credentials); the subscription keeps that
    # credential, so a key revoked afterwards is refused at the next change like a bearer's.
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    revoked_key, revoked_id = await served.key("ada")
    valid_key, _ = await served.key("bob")
    revoked, valid = Told(), Told()
    async with (
        httpx2.AsyncClient(headers={"X-API-Key": revoked_key}, timeout=30) as http,
        Client(
            streamable_http_client(served.url, http_client=http),
            mode="legacy",
            message_handler=revoked,
        ) as ada,
        mcp_http_client(served.url, valid_key, mode="legacy", message_handler=valid) as bob,
    ):
        for client in (ada, bob):
            await client.subscribe_resource("trip://T-1")  # ada's key let her in
        await served.revoke(revoked_id)
        await touch(bob, "trip://T-1")
        with anyio.fail_after(10):
            await valid.updated.wait()
        with anyio.move_on_after(NEGATIVE_WAIT):
            await revoked.updated.wait()
    assert revoked.uris == []
    assert valid.uris == ["trip://T-1"]
