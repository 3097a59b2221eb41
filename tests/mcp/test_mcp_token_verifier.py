"""The SDK's ``TokenVerifier`` hook over the host: what it hands the SDK for each token,
and the bearer backend that hands the SDK what its own would, reading credentials as REST.

It builds the SDK's access token without validating it (it runs on every request), so
these tests pin that the token is exactly what validation would have produced.
"""

from __future__ import annotations

import pytest
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken, principal_components
from mcp_support import ALICE, TOKENS, Probe, build_host
from starlette.requests import HTTPConnection

from charter.auth import Principal, StaticAuthenticator
from charter.host import Host
from charter.mcp._auth import HostBearerBackend, HostTokenVerifier, PrincipalAccessToken

pytestmark = pytest.mark.anyio


async def test_a_valid_token_becomes_an_sdk_access_token_carrying_the_principal() -> None:
    verifier = HostTokenVerifier(build_host(Probe()))
    token = await verifier.verify_token("alice-token")
    assert isinstance(token, PrincipalAccessToken)
    assert token.principal is ALICE
    assert token.client_id == "acme/alice"
    assert token.scopes == ["trips:read", "trips:write"]
    assert token.subject == "alice"
    assert (token.token, token.expires_at, token.resource, token.claims) == ("", None, None, None)
    assert principal_components(token) == ("acme/alice", None, "alice")


async def test_the_unvalidated_token_equals_what_validation_would_build() -> None:
    verifier = HostTokenVerifier(build_host(Probe()))
    token = await verifier.verify_token("alice-token")
    assert token is not None
    validated = PrincipalAccessToken.model_validate(token.model_dump())
    assert validated == token
    assert AccessToken.model_validate(token.model_dump(exclude={"principal"})).scopes == [
        "trips:read",
        "trips:write",
    ]
    assert token.model_fields_set >= {"token", "client_id", "scopes", "subject", "principal"}


async def test_the_same_subject_in_two_tenants_gets_two_client_ids() -> None:
    other = Principal(subject="alice", tenant_id="globex", scopes=frozenset({"trips:read"}))
    registry = build_host(Probe()).registry
    host = Host(registry, authenticator=StaticAuthenticator({**TOKENS, "globex-alice": other}))
    verifier = HostTokenVerifier(host)
    mine = await verifier.verify_token("alice-token")
    theirs = await verifier.verify_token("globex-alice")
    assert mine is not None and theirs is not None
    assert (mine.client_id, theirs.client_id) == ("acme/alice", "globex/alice")


async def test_a_tenant_with_a_slash_never_shares_a_client_id_with_another_tenant() -> None:
    # Without escaping, both would be client "acme/x/k1" with subject "x/k1": one session.
    keyed = Principal(subject="x/k1", tenant_id="acme/x", scopes=frozenset(), api_key_id="k1")
    other = Principal(subject="x/k1", tenant_id="acme", scopes=frozenset())
    host = Host(
        build_host(Probe()).registry, authenticator=StaticAuthenticator({"k": keyed, "o": other})
    )
    verifier = HostTokenVerifier(host)
    mine, theirs = await verifier.verify_token("k"), await verifier.verify_token("o")
    assert mine is not None and theirs is not None
    assert principal_components(mine) != principal_components(theirs)
    assert mine.client_id == "acme%2Fx/k1"


async def test_an_unknown_or_missing_token_is_refused() -> None:
    verifier = HostTokenVerifier(build_host(Probe()))
    assert await verifier.verify_token("no-such-token") is None
    assert await verifier.verify_token("") is None


async def test_a_principal_gets_one_token_and_a_changed_principal_a_new_one() -> None:
    # Built once per principal: the SDK only reads a verified token.
    changed = Principal(subject="alice", tenant_id="acme", scopes=frozenset({"trips:read"}))
    tokens = {**TOKENS}
    host = Host(build_host(Probe()).registry, authenticator=StaticAuthenticator(tokens))
    verifier = HostTokenVerifier(host)
    first = await verifier.verify_token("alice-token")
    assert first is not None and await verifier.verify_token("alice-token") is first
    host.authenticator = StaticAuthenticator({**tokens, "alice-token": changed})
    later = await verifier.verify_token("alice-token")
    assert isinstance(later, PrincipalAccessToken) and later.principal is changed
    assert later.scopes == ["trips:read"]


def _connection(*headers: tuple[bytes, bytes]) -> HTTPConnection:
    return HTTPConnection({"type": "http", "headers": list(headers)})


@pytest.mark.parametrize(
    "headers",
    [
        (),
        ((b"authorization", b"Bearer alice-token"),),
        ((b"authorization", b"bearer alice-token"),),
        ((b"authorization", b"BEARER alice-token"),),
        ((b"authorization", b"Bearer no-such-token"),),
        ((b"authorization", b"Basic alice-token"),),
        ((b"authorization", b"Bearer"),),
        ((b"authorization", b"Bearer "),),
    ],
)
async def test_the_bearer_backend_answers_a_bearer_token_as_the_sdks(
    headers: tuple[tuple[bytes, bytes], ...],
) -> None:
    verifier = HostTokenVerifier(build_host(Probe()))
    sdk = await BearerAuthBackend(verifier).authenticate(_connection(*headers))
    ours = await HostBearerBackend(verifier).authenticate(_connection(*headers))
    if sdk is None:
        assert ours is None
        return
    assert ours is not None
    (sdk_credentials, sdk_user), (credentials, user) = sdk, ours
    assert credentials.scopes == sdk_credentials.scopes
    assert isinstance(user, AuthenticatedUser)
    assert user.access_token == sdk_user.access_token
    assert (user.username, user.scopes) == (sdk_user.username, sdk_user.scopes)


@pytest.mark.parametrize(
    ("headers", "subject"),
    [
        # Where REST's reading (charter._credentials) differs from the SDK's backend.
        (((b"authorization", b"Bearer  alice-token"),), "alice"),
        (((b"x-api-key", b"alice-token"),), "alice"),
        (((b"authorization", b"Basic Zm9v"), (b"x-api-key", b"alice-token")), "alice"),
        (((b"authorization", b"Bearer alice-token"), (b"x-api-key", b"alice-token")), None),
        (((b"x-api-key", b""),), None),
        # Ambiguous: the Admission layer answers 400 first; the backend finds no one.
        (
            ((b"authorization", b"Bearer alice-token"), (b"authorization", b"Bearer bob-token")),
            None,
        ),
        (((b"authorization", b"Bearer bob-token"), (b"x-api-key", b"alice-token")), None),
    ],
)
async def test_the_bearer_backend_reads_credentials_as_rest(
    headers: tuple[tuple[bytes, bytes], ...], subject: str | None
) -> None:
    backend = HostBearerBackend(HostTokenVerifier(build_host(Probe())))
    ours = await backend.authenticate(_connection(*headers))
    if subject is None:
        assert ours is None
        return
    assert ours is not None
    user = ours[1]
    assert isinstance(user, AuthenticatedUser)
    token = user.access_token
    assert isinstance(token, PrincipalAccessToken) and token.principal.subject == subject


async def test_the_bearer_backend_hands_one_principal_the_same_user() -> None:
    backend = HostBearerBackend(HostTokenVerifier(build_host(Probe())))
    first = await backend.authenticate(_connection((b"authorization", b"Bearer alice-token")))
    again = await backend.authenticate(_connection((b"authorization", b"Bearer alice-token")))
    bob = await backend.authenticate(_connection((b"authorization", b"Bearer bob-token")))
    assert first is not None and again is not None and bob is not None
    assert again[1] is first[1] and isinstance(first[1], AuthenticatedUser)
    token = first[1].access_token
    assert isinstance(token, PrincipalAccessToken) and token.principal is ALICE
    assert bob[1] is not first[1]
