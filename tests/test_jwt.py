"""``charter.jwt.JwtAuthenticator``: real keys, real tokens, a real JWKS server on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import http.server
import json
import re
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import get_default_algorithms
from jwt.warnings import InsecureKeyLengthWarning

from charter.auth import (
    AuthenticationFailed,
    AuthenticationUnavailable,
    Authenticator,
    Credentials,
    Principal,
)
from charter.errors import ConfigurationError
from charter.jwt import (
    ClaimMapping,
    JwtAuthenticator,
    TokenFailure,
    TokenRejected,
    discover_jwks_url,
)
from live_server import http_server, json_server

pytestmark = pytest.mark.anyio

ISSUER = "https://issuer.example"
AUDIENCE = "https://tools.example/mcp"
SECRET = "a-shared-secret-of-at-least-32-bytes!"
DROP = object()
"""A claim override that removes the claim."""


# --- keys, tokens and a JWKS server -----------------------------------------------------------


@dataclass
class SigningKey:
    kid: str
    alg: str
    private: Any

    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        data = get_default_algorithms()[self.alg].to_jwk(public, as_dict=True)
        return {**data, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def sign(self, headers: Mapping[str, Any] | None = None, /, **overrides: Any) -> str:
        return jwt.encode(
            claims(**overrides),
            self.private,
            algorithm=self.alg,
            headers={"kid": self.kid, **(headers or {})},
        )


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "user-1",
        "tenant_id": "acme",
        "scope": "trips:read trips:write",
        "name": "Ana",
        "iat": now,
        "exp": now + 300,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not DROP}


def b64(document: Mapping[str, Any]) -> str:
    return jwt.utils.base64url_encode(json.dumps(document).encode()).decode()


def jwks(*keys: SigningKey) -> dict[str, Any]:
    return {"keys": [key.jwk() for key in keys]}


@pytest.fixture(scope="module")
def rsa_key() -> SigningKey:
    return SigningKey(
        "rsa-1", "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )


@pytest.fixture(scope="module")
def rotated_key() -> SigningKey:
    return SigningKey(
        "rsa-2", "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )


@pytest.fixture(scope="module")
def ec_key() -> SigningKey:
    return SigningKey("ec-1", "ES256", ec.generate_private_key(ec.SECP256R1()))


@pytest.fixture(scope="module")
def ed_key() -> SigningKey:
    return SigningKey("ed-1", "EdDSA", ed25519.Ed25519PrivateKey.generate())


@dataclass
class JwksServer:
    """A JWKS (and OIDC discovery document) on 127.0.0.1 that counts its fetches."""

    document: dict[str, Any]
    status: int = 200
    body: bytes | None = None
    fetches: int = 0
    discovery: dict[str, Any] = field(default_factory=dict)
    url: str = ""

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks.json"


@pytest.fixture
def server(rsa_key: SigningKey) -> Iterator[JwksServer]:
    state = JwksServer(document=jwks(rsa_key))

    def answer(path: str) -> tuple[int, bytes]:
        if path == "/.well-known/openid-configuration":
            return 200, json.dumps(state.discovery).encode()
        state.fetches += 1
        body = state.body if state.body is not None else json.dumps(state.document).encode()
        return state.status, body

    with json_server(answer) as url:
        state.url = url
        yield state


def authenticator(server: JwksServer, **options: Any) -> JwtAuthenticator:
    settings: dict[str, Any] = {"issuer": ISSUER, "audience": AUDIENCE, **options}
    return JwtAuthenticator(jwks_url=server.jwks_url, **settings)


async def rotated(
    server: JwksServer, old: SigningKey, new: SigningKey, *, cooldown: float
) -> JwtAuthenticator:
    """An authenticator that accepted a token of ``old``; then the JWKS adds ``new``."""
    auth = authenticator(server, jwks_refresh_cooldown=cooldown)
    assert await auth.authenticate(Credentials(bearer=old.sign())) is not None
    server.document = jwks(old, new)
    return auth


async def unavailable(auth: JwtAuthenticator, token: str) -> AuthenticationUnavailable:
    # Keys that cannot be fetched say nothing about the token: not a TokenRejected (401).
    with pytest.raises(AuthenticationUnavailable) as caught:
        await auth.authenticate(Credentials(bearer=token))
    assert not isinstance(caught.value, AuthenticationFailed)
    return caught.value


async def rejected(auth: JwtAuthenticator, token: str) -> TokenRejected:
    with pytest.raises(TokenRejected) as caught:
        await auth.authenticate(Credentials(bearer=token))
    message = f"{caught.value} {caught.value!r}"
    for part in token.split("."):
        assert len(part) < 8 or part not in message  # the token never reaches the message
    return caught.value


# --- accepting ---------------------------------------------------------------------------------


async def test_a_token_signed_by_a_key_in_the_jwks_url_is_the_principal_its_claims_name(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    auth = authenticator(server)
    token = rsa_key.sign(scope="trips:read trips:write", scp=["bookings:refund"])
    principal = await auth.authenticate(Credentials(bearer=token))
    assert principal == Principal(
        subject="user-1",
        tenant_id="acme",
        scopes=frozenset({"trips:read", "trips:write", "bookings:refund"}),
        display_name="Ana",
    )
    assert isinstance(auth, Authenticator)


async def test_no_credentials_is_an_anonymous_caller(server: JwksServer) -> None:
    assert await authenticator(server).authenticate(Credentials()) is None
    assert server.fetches == 0


async def test_an_api_key_is_refused_not_treated_as_anonymous(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    auth = authenticator(server)
    assert (await rejected(auth, "")).reason == "malformed"
    with pytest.raises(TokenRejected) as caught:
        await auth.authenticate(Credentials(api_key="chk_1_secret"))
    assert caught.value.reason == "unsupported_credentials"
    with pytest.raises(TokenRejected) as both:
        await auth.authenticate(Credentials(bearer=rsa_key.sign(), api_key="chk_1_secret"))
    assert both.value.reason == "unsupported_credentials"


async def test_ec_keys_from_a_static_jwks_and_an_ed25519_public_key_verify(
    ec_key: SigningKey, ed_key: SigningKey
) -> None:
    static = JwtAuthenticator(issuer=ISSUER, audience=AUDIENCE, jwks=jwks(ec_key))
    assert (await static.authenticate(Credentials(bearer=ec_key.sign()))) is not None
    single = JwtAuthenticator(
        issuer=ISSUER, audience=AUDIENCE, public_key=ed_key.public_pem(), algorithms=["EdDSA"]
    )
    # One public key verifies whatever kid the token names, or none.
    for token in (
        ed_key.sign({"kid": "anything"}),
        jwt.encode(claims(), ed_key.private, algorithm="EdDSA"),
    ):
        principal = await single.authenticate(Credentials(bearer=token))
        assert principal is not None and principal.subject == "user-1"


async def test_a_token_for_any_of_several_audiences_is_accepted(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    auth = authenticator(server, audience=["https://other.example", AUDIENCE])
    token = rsa_key.sign(aud=["https://unrelated.example", AUDIENCE])
    assert await auth.authenticate(Credentials(bearer=token)) is not None


# --- refusing ----------------------------------------------------------------------------------


FAILURES: list[tuple[str, dict[str, Any], TokenFailure]] = [
    ("expired", {"exp": int(time.time()) - 3600}, "expired"),
    ("not yet valid", {"nbf": int(time.time()) + 3600}, "not_yet_valid"),
    ("issued in the future", {"iat": int(time.time()) + 3600}, "not_yet_valid"),
    ("wrong issuer", {"iss": "https://evil.example"}, "wrong_issuer"),
    ("issuer with a trailing slash", {"iss": ISSUER + "/"}, "wrong_issuer"),
    ("wrong audience", {"aud": "https://other.example"}, "wrong_audience"),
    ("no exp", {"exp": DROP}, "missing_claim"),
    ("no iss", {"iss": DROP}, "missing_claim"),
    ("no aud", {"aud": DROP}, "missing_claim"),
    ("no sub", {"sub": DROP}, "missing_claim"),
    ("no tenant", {"tenant_id": DROP}, "missing_claim"),
    ("a tenant that is not a string", {"tenant_id": 7}, "invalid_claim"),
    ("a padded tenant", {"tenant_id": " acme"}, "invalid_claim"),
    ("a blank subject", {"sub": ""}, "invalid_claim"),
    ("a subject that is not a string", {"sub": 42}, "invalid_claim"),
    ("an exp that is not a number", {"exp": "tomorrow"}, "malformed"),
]


@pytest.mark.parametrize(("case", "overrides", "reason"), FAILURES, ids=[c[0] for c in FAILURES])
async def test_a_token_failing_a_claim_check_is_refused_with_its_reason(
    server: JwksServer, rsa_key: SigningKey, case: str, overrides: dict[str, Any], reason: str
) -> None:
    failure = await rejected(authenticator(server), rsa_key.sign(**overrides))
    assert failure.reason == reason
    assert isinstance(failure, AuthenticationFailed)


async def test_a_missing_claim_is_named_in_the_message(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    assert str(await rejected(authenticator(server), rsa_key.sign(tenant_id=DROP))) == (
        "the token has no 'tenant_id' claim"
    )
    assert str(await rejected(authenticator(server), rsa_key.sign(exp=DROP))) == (
        "the token has no 'exp' claim"
    )


NOT_NUMERIC_DATES: list[tuple[str, Any]] = [
    ("a numeric string", "{future}"),
    ("a float string", "{future}.5"),
    ("1e300", 1e300),
    ("an integer past year 9999", 253_402_300_800),
    ("NaN", float("nan")),
    ("infinity", float("inf")),
    ("true", True),
    ("a negative number", -1),
    ("null", None),
    ("a list", [1]),
]


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
@pytest.mark.parametrize(
    ("case", "value"), NOT_NUMERIC_DATES, ids=[c[0] for c in NOT_NUMERIC_DATES]
)
async def test_a_time_claim_that_is_not_a_numeric_date_is_malformed(
    server: JwksServer, rsa_key: SigningKey, claim: str, case: str, value: Any
) -> None:
    future = int(time.time()) + 300
    if isinstance(value, str):
        value = value.format(future=future if claim == "exp" else future - 600)
    # A real signature: the claim, not the token's structure, is what is refused.
    failure = await rejected(authenticator(server), rsa_key.sign(**{claim: value}))
    assert failure.reason == "malformed"
    if value is not None:
        assert f"'{claim}'" in str(failure)


async def test_fractional_numeric_dates_are_accepted(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    now = time.time()
    token = rsa_key.sign(exp=now + 300.25, nbf=now - 1.5, iat=now - 1.5)
    assert await authenticator(server).authenticate(Credentials(bearer=token)) is not None


CONTROL_CHARACTERS = ["\x00", "\n", "\r", "\x1b", "\x7f", "\x85", "\u2028", "\u202e", "\ud800"]


@pytest.mark.parametrize("char", CONTROL_CHARACTERS, ids=[repr(c) for c in CONTROL_CHARACTERS])
@pytest.mark.parametrize("claim", ["sub", "tenant_id", "actor"])
async def test_a_control_character_in_the_subject_tenant_or_actor_is_malformed(
    server: JwksServer, rsa_key: SigningKey, char: str, claim: str
) -> None:
    auth = authenticator(server, claims_to_principal=ClaimMapping(actor_claim="actor"))
    values = {"sub": "user-1", "tenant_id": "acme", "actor": "staff"}
    values[claim] = f"ac{char}me"
    failure = await rejected(auth, rsa_key.sign(**values))
    assert failure.reason == "malformed"
    assert "control character" in str(failure)


async def test_a_custom_mapper_cannot_smuggle_a_control_character_either(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    def mapper(claims: Mapping[str, Any]) -> Principal:
        return Principal(subject="user-1", tenant_id="acme\x00globex", scopes=frozenset())

    auth = authenticator(server, claims_to_principal=mapper)
    assert (await rejected(auth, rsa_key.sign())).reason == "invalid_claim"


async def test_unicode_letters_in_the_subject_and_tenant_are_accepted(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    token = rsa_key.sign(sub="zoë@exämple", tenant_id="société-générale")
    principal = await authenticator(server).authenticate(Credentials(bearer=token))
    assert principal is not None and principal.tenant_id == "société-générale"


@pytest.mark.parametrize(
    "token", ["not-a-jwt", "a.b", "a.b.c", "x" * 5000, "a.b.c.d.e", "e30.W10.x"]
)
async def test_a_malformed_token_is_refused(server: JwksServer, token: str) -> None:
    assert (await rejected(authenticator(server), token)).reason == "malformed"
    assert server.fetches == 0


async def test_a_token_whose_header_names_no_algorithm_is_refused(server: JwksServer) -> None:
    no_alg = f"{b64({'kid': 'rsa-1'})}.{b64(claims())}.c2ln"
    assert (await rejected(authenticator(server), no_alg)).reason == "algorithm_not_allowed"


async def test_a_token_signed_by_another_key_under_a_known_kid_has_a_bad_signature(
    server: JwksServer, rsa_key: SigningKey, rotated_key: SigningKey
) -> None:
    forged = SigningKey(rsa_key.kid, "RS256", rotated_key.private).sign()
    assert (await rejected(authenticator(server), forged)).reason == "bad_signature"
    header, _, signature = rsa_key.sign().split(".")
    swapped = f"{header}.{b64(claims(tenant_id='globex'))}.{signature}"
    assert (await rejected(authenticator(server), swapped)).reason == "bad_signature"


async def test_alg_none_is_refused_and_cannot_be_configured(server: JwksServer) -> None:
    unsigned = jwt.encode(claims(), "", algorithm="none", headers={"kid": "rsa-1"})
    assert (await rejected(authenticator(server), unsigned)).reason == "algorithm_not_allowed"
    for spelling in ("none", "None", "NONE"):
        forged = f"{b64({'alg': spelling, 'kid': 'rsa-1'})}.{b64(claims())}."
        assert (await rejected(authenticator(server), forged)).reason == "algorithm_not_allowed"
    with pytest.raises(ConfigurationError):
        authenticator(server, algorithms=["RS256", "none"])
    assert server.fetches == 0


async def test_hs256_signed_with_the_public_key_is_refused_without_a_secret(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    # The classic algorithm confusion: the public key (which anyone has) as an HMAC secret.
    header = b64({"alg": "HS256", "typ": "JWT", "kid": rsa_key.kid})
    signing_input = f"{header}.{b64(claims())}"
    mac = hmac.new(rsa_key.public_pem(), signing_input.encode(), hashlib.sha256).digest()
    forged = f"{signing_input}.{jwt.utils.base64url_encode(mac).decode()}"
    assert (await rejected(authenticator(server), forged)).reason == "algorithm_not_allowed"
    with pytest.raises(ConfigurationError, match="secret"):
        authenticator(server, algorithms=["RS256", "HS256"])


async def test_a_shared_secret_enables_hs256_and_only_hs256() -> None:
    auth = JwtAuthenticator(issuer=ISSUER, audience=AUDIENCE, secret=SECRET)
    good = jwt.encode(claims(), SECRET, algorithm="HS256")
    assert (await auth.authenticate(Credentials(bearer=good))) is not None
    wrong = jwt.encode(claims(), SECRET + "x", algorithm="HS256")
    assert (await rejected(auth, wrong)).reason == "bad_signature"
    stronger = jwt.encode(claims(), SECRET + "x" * 40, algorithm="HS512")
    assert (await rejected(auth, stronger)).reason == "algorithm_not_allowed"
    with pytest.raises(ConfigurationError, match="at least 32 bytes"):
        JwtAuthenticator(issuer=ISSUER, audience=AUDIENCE, secret="short")
    with pytest.raises(ConfigurationError, match="HS256"):
        JwtAuthenticator(issuer=ISSUER, audience=AUDIENCE, secret=SECRET, algorithms=["RS256"])
    assert "a-shared-secret" not in repr(auth)


async def test_an_algorithm_outside_the_allow_list_is_refused_before_any_fetch(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    strong = SigningKey(rsa_key.kid, "RS512", rsa_key.private).sign()
    assert (await rejected(authenticator(server), strong)).reason == "algorithm_not_allowed"
    assert server.fetches == 0


async def test_an_allowed_algorithm_that_does_not_fit_the_key_is_refused(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    # The JWK says RS256; a PS256 token under the same kid is not verified with it.
    auth = authenticator(server, algorithms=["RS256", "PS256"])
    token = SigningKey(rsa_key.kid, "PS256", rsa_key.private).sign()
    assert (await rejected(auth, token)).reason == "algorithm_not_allowed"


async def test_a_weak_rsa_key_is_refused(server: JwksServer) -> None:
    weak = SigningKey(
        "weak", "RS256", rsa.generate_private_key(public_exponent=65537, key_size=1024)
    )
    server.document = jwks(weak)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyLengthWarning)  # PyJWT warns the signer
        token = weak.sign()
    assert (await rejected(authenticator(server), token)).reason == "unusable_key"


# --- keys: caching, rotation, failures -----------------------------------------------------------


async def test_the_jwks_is_fetched_once_and_then_served_from_the_cache(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    auth = authenticator(server)
    for _ in range(5):
        assert await auth.authenticate(Credentials(bearer=rsa_key.sign())) is not None
    assert server.fetches == 1


async def test_a_rotated_key_is_found_with_exactly_one_refresh(
    server: JwksServer, rsa_key: SigningKey, rotated_key: SigningKey
) -> None:
    auth = await rotated(server, rsa_key, rotated_key, cooldown=0)
    tokens = [rotated_key.sign(sub=f"user-{i}") for i in range(8)]
    found = await asyncio.gather(*(auth.authenticate(Credentials(bearer=t)) for t in tokens))
    assert [p.subject for p in found if p is not None] == [f"user-{i}" for i in range(8)]
    assert server.fetches == 2


async def test_an_unknown_kid_refreshes_once_then_is_refused(
    server: JwksServer, rsa_key: SigningKey, rotated_key: SigningKey
) -> None:
    auth = authenticator(server, jwks_refresh_cooldown=0)
    assert (await rejected(auth, rotated_key.sign())).reason == "unknown_key"
    assert server.fetches == 1  # the first fetch is fresh: no refresh on top
    assert (await rejected(auth, rotated_key.sign())).reason == "unknown_key"
    assert server.fetches == 2  # one refresh for the unknown kid, no more
    no_kid = jwt.encode(claims(), rsa_key.private, algorithm="RS256")
    assert (await rejected(auth, no_kid)).reason == "unknown_key"
    assert server.fetches == 2  # a token naming no key never triggers a fetch


async def test_the_cooldown_stops_unknown_kids_from_refetching_the_jwks(
    server: JwksServer, rsa_key: SigningKey, rotated_key: SigningKey
) -> None:
    auth = await rotated(server, rsa_key, rotated_key, cooldown=60)
    for _ in range(3):
        assert (await rejected(auth, rotated_key.sign())).reason == "unknown_key"
    assert server.fetches == 1


@pytest.mark.parametrize(
    ("status", "body"),
    [(500, b"{}"), (200, b"<html>not json</html>"), (200, b"[]"), (200, b'{"keys": []}')],
)
async def test_a_jwks_that_cannot_be_fetched_or_read_is_keys_unavailable(
    server: JwksServer, rsa_key: SigningKey, status: int, body: bytes
) -> None:
    server.status, server.body = status, body
    auth = authenticator(server, jwks_refresh_cooldown=0)
    assert (await unavailable(auth, rsa_key.sign())).reason == "keys_unavailable"
    server.status, server.body = 200, None
    assert await auth.authenticate(Credentials(bearer=rsa_key.sign())) is not None


async def test_an_unreachable_jwks_url_is_keys_unavailable_and_backs_off(
    rsa_key: SigningKey,
) -> None:
    with socket_that_refuses() as port:
        auth = JwtAuthenticator(
            issuer=ISSUER, audience=AUDIENCE, jwks_url=f"http://127.0.0.1:{port}/jwks.json"
        )
        first = await unavailable(auth, rsa_key.sign())
        again = await unavailable(auth, rsa_key.sign())  # within the cooldown: no second attempt
    assert first.reason == again.reason == "keys_unavailable"
    assert "try again later" in str(first)


async def test_a_jwks_that_trickles_in_is_keys_unavailable_once_jwks_timeout_passed(
    rsa_key: SigningKey,
) -> None:
    # Each byte comes within urllib's per-read timeout, so only a deadline on the whole
    # fetch ends it; the callers waiting behind it get the same answer, and no second
    # fetch starts while the first still trickles.
    body = json.dumps(jwks(rsa_key)).encode()
    started: list[float] = []
    done = threading.Event()

    class Trickle(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            started.append(time.monotonic())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for index in range(0, len(body), 4):
                if done.wait(0.3):
                    return  # the test is over: close the connection
                self.wfile.write(body[index : index + 4])
                self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with http_server(Trickle) as url:
        auth = JwtAuthenticator(
            issuer=ISSUER,
            audience=AUDIENCE,
            jwks_url=f"{url}/jwks.json",
            jwks_timeout=1,
            jwks_refresh_cooldown=0,
        )
        began = time.monotonic()
        try:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    for _ in range(3):
                        tg.start_soon(unavailable, auth, rsa_key.sign())
        finally:
            done.set()
        waited = time.monotonic() - began
    assert waited < 5, waited  # the whole body takes minutes
    assert len(started) == 1


class socket_that_refuses:
    """A loopback port nothing listens on."""

    def __enter__(self) -> int:
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = int(sock.getsockname()[1])
        sock.close()
        return self.port

    def __exit__(self, *exc: object) -> None:
        return None


# --- clock leeway --------------------------------------------------------------------------------


async def test_the_default_leeway_accepts_small_clock_skew_and_no_more(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    now = int(time.time())
    auth = authenticator(server)
    assert await auth.authenticate(Credentials(bearer=rsa_key.sign(exp=now - 10))) is not None
    assert (
        await auth.authenticate(Credentials(bearer=rsa_key.sign(nbf=now + 10, iat=now + 10)))
        is not None
    )
    assert (await rejected(auth, rsa_key.sign(exp=now - 60))).reason == "expired"
    assert (await rejected(auth, rsa_key.sign(nbf=now + 60))).reason == "not_yet_valid"
    strict = authenticator(server, leeway=0)
    assert (await rejected(strict, rsa_key.sign(exp=now - 10))).reason == "expired"
    lenient = authenticator(server, leeway=120)
    assert await lenient.authenticate(Credentials(bearer=rsa_key.sign(exp=now - 60))) is not None


# --- claims to a principal -----------------------------------------------------------------------


async def test_the_claim_mapping_reads_the_configured_claims(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    mapping = ClaimMapping(
        tenant_claim="https://example.com/org",
        scope_claims=("scp",),
        actor_claim="actor",
        kind="agent",
        display_name_claim=None,
    )
    auth = authenticator(server, claims_to_principal=mapping)
    token = rsa_key.sign(
        **{"https://example.com/org": "globex", "actor": "customer"},
        scope="admin",
        scp="trips:read  Admin trips:write\tbookings:read",
    )
    principal = await auth.authenticate(Credentials(bearer=token))
    assert principal == Principal(
        subject="user-1",
        tenant_id="globex",
        scopes=frozenset({"trips:read"}),  # 'Admin' and the tab-joined pair are not scopes
        kind="agent",
        actor="customer",
    )
    without_actor = await rejected(auth, rsa_key.sign(**{"https://example.com/org": "globex"}))
    assert without_actor.reason == "missing_claim"


async def test_a_configured_kind_claim_names_the_kind_and_its_absence_refuses_the_token(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    # Only a person decides approvals: a machine token without the claim must not be one.
    auth = authenticator(server, claims_to_principal=ClaimMapping(kind_claim="kind"))
    for kind in ("person", "agent", "service"):
        principal = await auth.authenticate(Credentials(bearer=rsa_key.sign(kind=kind)))
        assert principal is not None and principal.kind == kind
    missing = await rejected(auth, rsa_key.sign())
    assert missing.reason == "missing_claim" and "'kind'" in str(missing)
    assert (await rejected(auth, rsa_key.sign(kind="robot"))).reason == "invalid_claim"


async def test_a_scope_claim_that_is_neither_a_string_nor_a_list_grants_nothing(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    token = rsa_key.sign(scope={"trips:read": True}, scp=7)
    principal = await authenticator(server).authenticate(Credentials(bearer=token))
    assert principal is not None and principal.scopes == frozenset()


async def test_a_custom_mapper_sync_or_async_builds_the_principal(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    def sync_mapper(claims: Mapping[str, Any]) -> Principal:
        return Principal(subject=claims["sub"], tenant_id="t-" + claims["org"], scopes=frozenset())

    async def async_mapper(claims: Mapping[str, Any]) -> Principal:
        await asyncio.sleep(0)
        return sync_mapper(claims)

    for mapper in (sync_mapper, async_mapper):
        auth = authenticator(server, claims_to_principal=mapper)
        principal = await auth.authenticate(Credentials(bearer=rsa_key.sign(org="acme")))
        assert principal is not None and principal.tenant_id == "t-acme"
        # The mapper's own failure to build a principal is a refusal, not a crash.
        assert (await rejected(auth, rsa_key.sign(org=" "))).reason == "invalid_claim"


async def test_a_mapper_may_refuse_a_token(server: JwksServer, rsa_key: SigningKey) -> None:
    def mapper(claims: Mapping[str, Any]) -> Principal:
        raise AuthenticationFailed("this client is not allowed here")

    auth = authenticator(server, claims_to_principal=mapper)
    with pytest.raises(AuthenticationFailed, match="not allowed here"):
        await auth.authenticate(Credentials(bearer=rsa_key.sign()))


# --- configuration --------------------------------------------------------------------------------


def test_exactly_one_key_source_is_required(rsa_key: SigningKey) -> None:
    with pytest.raises(ConfigurationError, match="exactly one"):
        JwtAuthenticator(issuer=ISSUER, audience=AUDIENCE)
    with pytest.raises(ConfigurationError, match="exactly one"):
        JwtAuthenticator(issuer=ISSUER, audience=AUDIENCE, jwks=jwks(rsa_key), secret=SECRET)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"jwks_url": "http://idp.example/jwks.json"}, "https"),
        ({"jwks_url": "file:///etc/passwd"}, "https"),
        ({"issuer": " "}, "issuer"),
        ({"audience": []}, "audience"),
        ({"audience": ""}, "audience"),
        ({"leeway": -1}, "leeway"),
        ({"jwks_cache_seconds": 0}, "jwks_cache_seconds"),
        ({"jwks_refresh_cooldown": -5}, "jwks_refresh_cooldown"),
        ({"jwks_timeout": float("nan")}, "jwks_timeout"),
        ({"algorithms": "RS256"}, "list"),
        ({"algorithms": ["RS257"]}, "RS257"),
        ({"algorithms": []}, "algorithms"),
        ({"jwks": {"keys": []}}, "JWKS"),
        ({"public_key": "not a pem"}, "PEM"),
    ],
)
def test_a_misconfiguration_is_caught_at_construction(options: dict[str, Any], match: str) -> None:
    settings: dict[str, Any] = {"issuer": ISSUER, "audience": AUDIENCE}
    if not {"jwks_url", "jwks", "public_key"} & set(options):
        settings["jwks_url"] = "https://idp.example/jwks.json"
    with pytest.raises(ConfigurationError, match=match):
        JwtAuthenticator(**{**settings, **options})


def test_a_public_key_must_fit_an_allowed_algorithm_and_be_public(ec_key: SigningKey) -> None:
    with pytest.raises(ConfigurationError, match="cannot verify"):
        JwtAuthenticator(
            issuer=ISSUER, audience=AUDIENCE, public_key=ec_key.public_pem(), algorithms=["RS256"]
        )
    with pytest.raises(ConfigurationError, match="not a private key"):
        JwtAuthenticator(issuer=ISSUER, audience=AUDIENCE, public_key=ec_key.private)


def test_the_claim_mapping_checks_its_own_settings() -> None:
    with pytest.raises(ConfigurationError, match="not the string"):
        ClaimMapping(scope_claims="scope")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="kind"):
        ClaimMapping(kind="robot")  # type: ignore[arg-type]


def test_the_repr_names_the_issuer_and_never_a_secret() -> None:
    auth = JwtAuthenticator(issuer=ISSUER, audience=AUDIENCE, secret=SECRET)
    assert ISSUER in repr(auth) and SECRET not in repr(auth)


# --- OIDC discovery -------------------------------------------------------------------------------


async def test_discovery_reads_the_jwks_url_of_the_issuer(
    server: JwksServer, rsa_key: SigningKey
) -> None:
    server.discovery = {"issuer": server.url, "jwks_uri": server.jwks_url}
    url = await discover_jwks_url(server.url)
    assert url == server.jwks_url
    auth = JwtAuthenticator(issuer=server.url, audience=AUDIENCE, jwks_url=url)
    assert await auth.authenticate(Credentials(bearer=rsa_key.sign(iss=server.url))) is not None


@pytest.mark.parametrize(
    "document",
    [
        {"issuer": "https://evil.example", "jwks_uri": "https://evil.example/jwks"},
        {},
        {"issuer": "x"},
    ],
)
async def test_a_discovery_document_for_another_issuer_or_without_keys_is_refused(
    server: JwksServer, document: dict[str, Any]
) -> None:
    server.discovery = document
    with pytest.raises(ConfigurationError):
        await discover_jwks_url(server.url)


async def test_discovery_of_an_unreachable_issuer_is_a_configuration_error() -> None:
    with socket_that_refuses() as port:
        with pytest.raises(ConfigurationError, match="cannot read"):
            await discover_jwks_url(f"http://127.0.0.1:{port}")
    with pytest.raises(ConfigurationError, match="https"):
        await discover_jwks_url("http://idp.example")


# --- docs -----------------------------------------------------------------------------------


def test_the_jwt_example_in_the_auth_docs_runs() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "auth.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    assert blocks
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "docs/auth.md", "exec"), namespace)
    assert isinstance(namespace["authenticator"], JwtAuthenticator)
