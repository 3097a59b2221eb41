"""API keys in ``SqlStore`` and ``ApiKeyAuthenticator``, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from pydantic import BaseModel
from tests.builders import Clock, tiered_tool

from charter import Completed, ErrorCode, Failed, Registry, ToolContext
from charter.auth import (
    AuthenticationFailed,
    Authenticator,
    Credentials,
    Principal,
    StaticAuthenticator,
)
from charter.host import Host
from charter.jwt import JwtAuthenticator
from charter.store import API_KEY_PREFIX, ApiKeyAuthenticator, ApiKeyRecord, SqlStore

pytestmark = pytest.mark.anyio

ALICE = Principal(subject="alice", tenant_id="acme", scopes=frozenset())


async def stored_hashes(store: SqlStore) -> list[str]:
    async with store.engine.connect() as conn:
        result = await conn.execute(sa.text("SELECT secret_hash FROM charter_api_keys"))
        return [str(v) for v in result.scalars()]


async def test_the_secret_is_returned_once_and_only_its_hash_is_stored(
    sql_store: SqlStore,
) -> None:
    key, record = await sql_store.create_api_key(
        tenant_id="acme", subject="ci-bot", scopes=["notes:write", "notes:read"], name="CI"
    )
    assert key.startswith(f"{API_KEY_PREFIX}{record.id}_")
    secret = key.removeprefix(f"{API_KEY_PREFIX}{record.id}_")
    assert len(secret) >= 43
    assert record.scopes == ("notes:read", "notes:write")
    assert (record.kind, record.actor, record.name) == ("agent", "staff", "CI")
    assert secret not in record.model_dump_json()
    [stored] = await stored_hashes(sql_store)
    assert secret not in stored and key not in stored
    assert len(stored) == 64  # a SHA-256 hex digest
    listed = await sql_store.list_api_keys()
    assert listed == [record]
    assert secret not in repr(listed)


async def test_the_authenticator_returns_an_api_key_principal(sql_store: SqlStore) -> None:
    key, record = await sql_store.create_api_key(
        tenant_id="acme", subject="ci-bot", scopes=["notes:write"], name="CI", actor="partner"
    )
    authenticator = ApiKeyAuthenticator(sql_store)
    assert isinstance(authenticator, Authenticator)
    for credentials in (Credentials(api_key=key), Credentials(bearer=key)):
        principal = await authenticator.authenticate(credentials)
        assert principal is not None
        assert (principal.subject, principal.tenant_id, principal.kind) == (
            "ci-bot",
            "acme",
            "agent",
        )
        assert principal.scopes == frozenset({"notes:write"})
        assert principal.api_key_id == record.id
        assert (principal.actor, principal.display_name) == ("partner", "CI")
    assert await authenticator.authenticate(Credentials()) is None


async def test_unknown_malformed_revoked_and_expired_keys_fail_alike(sql_store: SqlStore) -> None:
    now = datetime.now(UTC)
    revoked, revoked_record = await sql_store.create_api_key(
        tenant_id="acme", subject="a", scopes=[]
    )
    expired, _ = await sql_store.create_api_key(
        tenant_id="acme", subject="b", scopes=[], expires_at=now + timedelta(hours=1)
    )
    good, good_record = await sql_store.create_api_key(tenant_id="acme", subject="c", scopes=[])
    assert await sql_store.revoke_api_key(revoked_record.id)
    assert not await sql_store.revoke_api_key(revoked_record.id)
    assert not await sql_store.revoke_api_key("0000000000000000")
    later = ApiKeyAuthenticator(sql_store, clock=lambda: now + timedelta(hours=2))
    wrong_secret = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    messages = set()
    for presented in (
        revoked,
        expired,
        wrong_secret,
        f"{API_KEY_PREFIX}{'f' * 16}_{'x' * 43}",  # well formed, unknown id
        "chk_nothex_secret",
        "not-a-key",
        "chk_" + "0" * 16 + "_\x00" + "x" * 42,
        "x" * 10_000,
    ):
        with pytest.raises(AuthenticationFailed) as raised:
            await later.authenticate(Credentials(api_key=presented))
        messages.add(str(raised.value))
    assert messages == {"the credentials are not valid"}
    principal = await later.authenticate(Credentials(api_key=good))
    assert principal is not None and principal.api_key_id == good_record.id
    # Before its expiry the expiring key works.
    assert await ApiKeyAuthenticator(sql_store).authenticate(Credentials(api_key=expired))


async def test_sending_both_a_key_and_a_bearer_token_is_refused(sql_store: SqlStore) -> None:
    key, _ = await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=[])
    with pytest.raises(AuthenticationFailed, match="either"):
        await ApiKeyAuthenticator(sql_store).authenticate(Credentials(api_key=key, bearer=key))


async def test_every_authenticator_refuses_a_key_and_a_bearer_token_with_the_same_words(
    sql_store: SqlStore,
) -> None:
    # Catches the one-credential rule drifting between the authenticators that apply it
    # (charter.auth.presented_token): same error, same message for the caller.
    key, _ = await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=[])
    both = Credentials(api_key=key, bearer=key)
    jwt = JwtAuthenticator(issuer="https://issuer.test", audience="charter", secret="s" * 32)
    refusals = []
    for authenticator in (StaticAuthenticator({key: ALICE}), ApiKeyAuthenticator(sql_store), jwt):
        with pytest.raises(AuthenticationFailed) as refused:
            await authenticator.authenticate(both)
        refusals.append(str(refused.value))
    assert refusals == ["send either a bearer token or an API key, not both"] * 3


async def test_keys_are_listed_per_tenant(sql_store: SqlStore) -> None:
    _, a = await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=[])
    _, b = await sql_store.create_api_key(tenant_id="globex", subject="b", scopes=[])
    assert await sql_store.list_api_keys("acme") == [a]
    assert await sql_store.list_api_keys("globex") == [b]
    assert {r.id for r in await sql_store.list_api_keys()} == {a.id, b.id}
    assert await sql_store.list_api_keys("nobody") == []


async def test_invalid_key_definitions_fail_at_creation(sql_store: SqlStore) -> None:
    with pytest.raises(ValueError, match="invalid scopes"):
        await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=["Admin"])
    with pytest.raises(TypeError, match="not one string"):
        await sql_store.create_api_key(tenant_id="acme", subject="a", scopes="admin")
    with pytest.raises(ValueError, match="blank"):
        await sql_store.create_api_key(tenant_id=" ", subject="a", scopes=[])
    with pytest.raises(ValueError, match="control character"):
        await sql_store.create_api_key(tenant_id="acme\nglobex", subject="a", scopes=[])
    with pytest.raises(ValueError, match="control character"):
        await sql_store.create_api_key(tenant_id="acme", subject="a\u202e", scopes=[])
    with pytest.raises(ValueError, match="kind"):
        await sql_store.create_api_key(
            tenant_id="acme",
            subject="a",
            scopes=[],
            kind="robot",  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match="timezone-aware"):
        await sql_store.create_api_key(
            tenant_id="acme", subject="a", scopes=[], expires_at=datetime(2030, 1, 1)
        )
    with pytest.raises(ValueError):
        await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=[], name="n\x00")
    assert await sql_store.list_api_keys() == []


async def test_a_key_row_edited_to_hold_a_control_character_authenticates_no_one(
    sql_store: SqlStore,
) -> None:
    key, record = await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=[])
    async with sql_store.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE charter_api_keys SET tenant_id = :t WHERE id = :id"),
            {"t": "acme\nglobex", "id": record.id},
        )
    with pytest.raises(AuthenticationFailed):
        await ApiKeyAuthenticator(sql_store).authenticate(Credentials(bearer=key))


async def test_the_stored_hash_is_bound_to_the_key_id(sql_store: SqlStore) -> None:
    key, record = await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=[])
    secret = key.removeprefix(f"{API_KEY_PREFIX}{record.id}_")
    [stored] = await stored_hashes(sql_store)
    assert stored != hashlib.sha256(secret.encode()).hexdigest()
    assert stored == hashlib.sha256(f"charter-api-key:{record.id}:{secret}".encode()).hexdigest()


class Ping(BaseModel):
    text: str = "hi"


class Pong(BaseModel):
    tenant: str
    key: str | None


async def test_a_host_authenticates_callers_with_stored_keys(sql_store: SqlStore) -> None:
    async def whoami(ping: Ping, ctx: ToolContext) -> Pong:
        assert ctx.principal is not None
        return Pong(tenant=ctx.tenant_id, key=ctx.principal.api_key_id)

    registry = Registry()
    registry.register(
        tiered_tool("whoami", "read", whoami, Ping, Pong, required_scopes=["notes:read"])
    )
    # cache_seconds=0: every request asks the store, so a revocation takes effect at once.
    authenticator = ApiKeyAuthenticator(sql_store, cache_seconds=0)
    host = Host(registry, store=sql_store, authenticator=authenticator)
    key, record = await sql_store.create_api_key(
        tenant_id="acme", subject="reader", scopes=["notes:read"]
    )
    principal = await host.authenticate(Credentials(bearer=key))
    outcome = await host.invoke("whoami", {}, principal)
    assert isinstance(outcome, Completed)
    assert outcome.output == {"tenant": "acme", "key": record.id}
    await sql_store.revoke_api_key(record.id)
    with pytest.raises(AuthenticationFailed):
        await host.authenticate(Credentials(bearer=key))
    _, scopeless = await sql_store.create_api_key(tenant_id="acme", subject="x", scopes=[])
    assert scopeless.scopes == ()
    denied_key, _ = await sql_store.create_api_key(
        tenant_id="acme", subject="y", scopes=["notes:write"]
    )
    denied = await host.invoke(
        "whoami",
        {"_charter": {"requestId": str(uuid.uuid4())}},
        await host.authenticate(Credentials(api_key=denied_key)),
    )
    assert isinstance(denied, Failed) and denied.code is ErrorCode.AUTHORIZATION_DENIED


async def test_a_revoked_key_stops_working_within_the_cache_time(sql_store: SqlStore) -> None:
    clock = Clock()
    authenticator = ApiKeyAuthenticator(sql_store, clock=clock, cache_seconds=5)
    key, record = await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=[])
    first = await authenticator.authenticate(Credentials(bearer=key))
    assert first is not None and first.api_key_id == record.id
    assert await sql_store.revoke_api_key(record.id)
    # Remembered: the store is not asked again for up to cache_seconds.
    clock.now += timedelta(seconds=4.9)
    assert await authenticator.authenticate(Credentials(api_key=key)) == first
    clock.now += timedelta(seconds=0.1)
    with pytest.raises(AuthenticationFailed, match="not valid"):
        await authenticator.authenticate(Credentials(bearer=key))
    # A clock that went back does not extend the trust either.
    clock.now -= timedelta(seconds=60)
    with pytest.raises(AuthenticationFailed):
        await authenticator.authenticate(Credentials(bearer=key))


async def test_a_remembered_key_still_expires_on_time_and_failures_are_not_remembered(
    sql_store: SqlStore,
) -> None:
    clock = Clock()
    authenticator = ApiKeyAuthenticator(sql_store, clock=clock, cache_seconds=60)
    expiring, _ = await sql_store.create_api_key(
        tenant_id="acme", subject="a", scopes=[], expires_at=clock.now + timedelta(seconds=2)
    )
    assert await authenticator.authenticate(Credentials(bearer=expiring)) is not None
    clock.now += timedelta(seconds=2)
    with pytest.raises(AuthenticationFailed):
        await authenticator.authenticate(Credentials(bearer=expiring))
    # A refused key of the same id does not stand in the way of the right one.
    fresh, fresh_record = await sql_store.create_api_key(tenant_id="acme", subject="c", scopes=[])
    wrong = fresh[:-4] + ("AAAA" if not fresh.endswith("AAAA") else "BBBB")
    with pytest.raises(AuthenticationFailed):
        await authenticator.authenticate(Credentials(bearer=wrong))
    principal = await authenticator.authenticate(Credentials(bearer=fresh))
    assert principal is not None and principal.api_key_id == fresh_record.id
    with pytest.raises(ValueError, match="cache_seconds"):
        ApiKeyAuthenticator(sql_store, cache_seconds=-1)


async def test_the_cache_keeps_each_key_to_its_own_tenant_and_trusts_no_other_secret(
    sql_store: SqlStore,
) -> None:
    # One subject in two tenants, a person admin in acme and an agent in globex.
    acme, acme_record = await sql_store.create_api_key(
        tenant_id="acme", subject="ops", scopes=["admin"], kind="person"
    )
    globex, globex_record = await sql_store.create_api_key(
        tenant_id="globex", subject="ops", scopes=["trips:read"]
    )
    clock = Clock()
    authenticator = ApiKeyAuthenticator(sql_store, clock=clock)  # remembers keys 5 s
    for _ in range(2):  # verified by the store, then from the cache
        mine = await authenticator.authenticate(Credentials(bearer=acme))
        theirs = await authenticator.authenticate(Credentials(bearer=globex))
        assert mine is not None and theirs is not None
        assert (mine.key, mine.api_key_id, mine.scopes) == (
            "acme/ops",
            acme_record.id,
            frozenset({"admin"}),
        )
        assert (theirs.key, theirs.api_key_id, theirs.scopes) == (
            "globex/ops",
            globex_record.id,
            frozenset({"trips:read"}),
        )
    # While acme's key is remembered, its id with another secret (or globex's secret) fails.
    # chk_<16 hex>_<43 secret characters, "_" among them>
    forged = [
        acme[:-4] + ("AAAA" if not acme.endswith("AAAA") else "BBBB"),
        acme[:21] + globex[21:],
    ]
    for key in forged:
        with pytest.raises(AuthenticationFailed):
            await authenticator.authenticate(Credentials(bearer=key))
    # Revoking one tenant's key leaves the other's remembered key working.
    assert await sql_store.revoke_api_key(acme_record.id)
    clock.now += timedelta(seconds=5)
    with pytest.raises(AuthenticationFailed):
        await authenticator.authenticate(Credentials(bearer=acme))
    assert await authenticator.authenticate(Credentials(bearer=globex)) == theirs


async def test_requests_presenting_a_key_while_it_is_checked_share_the_check(
    sql_store: SqlStore,
) -> None:
    key, record = await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=[])
    asked: list[str] = []

    class Counting:
        async def verify_api_key(self, presented: str, *, now: datetime) -> ApiKeyRecord | None:
            asked.append(presented)
            return await sql_store.verify_api_key(presented, now=now)

    authenticator = ApiKeyAuthenticator(Counting())
    principals = await asyncio.gather(
        *(authenticator.authenticate(Credentials(bearer=key)) for _ in range(10))
    )
    assert {p.api_key_id for p in principals if p is not None} == {record.id}
    assert asked == [key]
    # A wrong key fails every request that presented it, with one question to the store.
    wrong = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    failed = await asyncio.gather(
        *(authenticator.authenticate(Credentials(bearer=wrong)) for _ in range(3)),
        return_exceptions=True,
    )
    assert all(isinstance(f, AuthenticationFailed) for f in failed)
    assert asked == [key, wrong]


async def test_a_request_that_joins_a_check_trusts_the_key_from_when_the_check_began(
    sql_store: SqlStore,
) -> None:
    # The store is slow: a second request arrives 3 s into the first one's check and
    # shares it. What it learned dates from when the check began, so the key is trusted
    # 5 s from then, not from when the second request arrived.
    clock = Clock()
    key, record = await sql_store.create_api_key(tenant_id="acme", subject="a", scopes=[])
    answer = asyncio.Event()

    class Slow:
        async def verify_api_key(self, presented: str, *, now: datetime) -> ApiKeyRecord | None:
            found = await sql_store.verify_api_key(presented, now=now)
            await answer.wait()
            return found

    authenticator = ApiKeyAuthenticator(Slow(), clock=clock, cache_seconds=5)
    first = asyncio.ensure_future(authenticator.authenticate(Credentials(bearer=key)))
    await asyncio.sleep(0.01)
    clock.now += timedelta(seconds=3)
    second = asyncio.ensure_future(authenticator.authenticate(Credentials(bearer=key)))
    await asyncio.sleep(0.01)
    answer.set()
    principal = await first
    assert principal is not None and await second == principal
    assert await sql_store.revoke_api_key(record.id)
    clock.now += timedelta(seconds=2.5)  # 5.5 s after the check began
    with pytest.raises(AuthenticationFailed, match="not valid"):
        await authenticator.authenticate(Credentials(bearer=key))
