"""JWT / OIDC bearer tokens as an ``Authenticator``, verified with PyJWT.

Needs the ``jwt`` extra: ``pip install 'charter[jwt]'`` (PyJWT with ``cryptography``).
``docs/auth.md`` describes the configuration, the claim mapping and every failure reason.
"""

from __future__ import annotations

import asyncio
import http.client
import inspect
import json
import logging
import math
import time
import unicodedata
import urllib.request
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias, get_args
from urllib.parse import urlsplit

try:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "charter.jwt needs PyJWT with cryptography: pip install 'charter[jwt]'"
    ) from exc

from .auth import (
    AuthenticationFailed,
    AuthenticationUnavailable,
    Credentials,
    Principal,
    PrincipalKind,
)
from .errors import ConfigurationError

__all__ = (
    "DEFAULT_ALGORITHMS",
    "ClaimMapping",
    "ClaimsMapper",
    "JwtAuthenticator",
    "PublicKey",
    "TokenFailure",
    "TokenRejected",
    "discover_jwks_url",
)

logger = logging.getLogger("charter.jwt")

DEFAULT_ALGORITHMS: tuple[str, ...] = ("RS256", "ES256")
"""The algorithms accepted when keys are public and ``algorithms`` is not given."""

PublicKey: TypeAlias = (
    rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey
)
"""A verification key ``JwtAuthenticator(public_key=...)`` takes (or its PEM text)."""

TokenFailure: TypeAlias = Literal[
    "unsupported_credentials",
    "malformed",
    "algorithm_not_allowed",
    "unknown_key",
    "unusable_key",
    "bad_signature",
    "expired",
    "not_yet_valid",
    "wrong_issuer",
    "wrong_audience",
    "missing_claim",
    "invalid_claim",
]
"""Why ``JwtAuthenticator`` rejected a token; ``TokenRejected.reason``."""

ClaimsMapper: TypeAlias = Callable[[Mapping[str, Any]], Principal | Awaitable[Principal]]
"""Turns a verified token's claims (read-only) into the caller's principal, sync or async.

Raise ``AuthenticationFailed`` (or ``TokenRejected``) to refuse the token; a ``ValueError``
or ``TypeError`` is refused as ``invalid_claim``. Usage: ``claims_to_principal=my_mapper``.
"""

_HMAC_ALGORITHMS = {"HS256": 32, "HS384": 48, "HS512": 64}
"""Each HMAC algorithm and the shortest secret it accepts (its hash size, RFC 7518 3.2)."""

_EC_CURVES = {
    "ES256": "secp256r1",
    "ES384": "secp384r1",
    "ES512": "secp521r1",
    "ES521": "secp521r1",
    "ES256K": "secp256k1",
}
_REQUIRED_CLAIMS = ["exp", "iss", "aud", "sub"]
_TIME_CLAIMS = ("exp", "nbf", "iat")
_LAST_NUMERIC_DATE = 253_402_300_799
"""9999-12-31T23:59:59Z, the last second a NumericDate may name (Python's datetime range)."""
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories no subject, tenant or actor may hold: controls (NUL, newline, ESC),
format characters (bidi overrides, zero-width), lone surrogates, line and paragraph
separators."""
_MIN_RSA_BITS = 2048
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_MAX_DOCUMENT_BYTES = 1 << 20


class TokenRejected(AuthenticationFailed):
    """Raised by ``JwtAuthenticator`` when a bearer token was sent but is not valid.

    The message is a short sentence for the caller (the HTTP transport shows it in the 401
    problem); it never contains the token. ``reason`` says which check failed.
    """

    def __init__(self, reason: TokenFailure, message: str) -> None:
        super().__init__(message)
        self.reason: TokenFailure = reason
        """Which check failed."""


_MESSAGES: dict[TokenFailure, str] = {
    "unsupported_credentials": "this server accepts JWT bearer tokens, not API keys",
    "malformed": "the bearer token is not a well-formed JWT",
    "algorithm_not_allowed": "the token's signing algorithm is not accepted",
    "unknown_key": "the token is signed with a key this server does not know",
    "unusable_key": "the token's signing key is too weak or of the wrong type",
    "bad_signature": "the token's signature is not valid",
    "expired": "the token has expired",
    "not_yet_valid": "the token is not valid yet",
    "wrong_issuer": "the token was issued by another issuer",
    "wrong_audience": "the token is meant for another audience",
    "missing_claim": "the token lacks a required claim",
    "invalid_claim": "the token's claims are not valid",
}

# Most specific first: InvalidSignatureError is a DecodeError.
_PYJWT_FAILURES: tuple[tuple[type[jwt.PyJWTError], TokenFailure], ...] = (
    (jwt.ExpiredSignatureError, "expired"),
    (jwt.ImmatureSignatureError, "not_yet_valid"),
    (jwt.InvalidIssuerError, "wrong_issuer"),
    (jwt.InvalidAudienceError, "wrong_audience"),
    (jwt.MissingRequiredClaimError, "missing_claim"),
    (jwt.InvalidSignatureError, "bad_signature"),
    (jwt.InvalidAlgorithmError, "algorithm_not_allowed"),
    (jwt.InvalidKeyError, "unusable_key"),
    (jwt.InvalidIssuedAtError, "malformed"),
    (jwt.DecodeError, "malformed"),
)


def _reject(reason: TokenFailure, message: str | None = None) -> TokenRejected:
    return TokenRejected(reason, message or _MESSAGES[reason])


def _keys_unavailable() -> AuthenticationUnavailable:
    # Not a verdict on the token: transports answer 503 (retry), never 401.
    return AuthenticationUnavailable(
        "the issuer's signing keys cannot be fetched now; try again later",
        reason="keys_unavailable",
    )


def _translate(exc: jwt.PyJWTError) -> TokenRejected:
    """PyJWT's error as a ``TokenRejected``; PyJWT's own message is never passed on."""
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return _reject("missing_claim", f"the token has no '{exc.claim}' claim")
    for kind, reason in _PYJWT_FAILURES:
        if isinstance(exc, kind):
            return _reject(reason)
    return _reject("invalid_claim")


# --- Claims to a principal ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimMapping:
    """The default ``ClaimsMapper``: which claims make the principal.

    ``sub`` is the subject. The tenant claim is required. Scopes are read from each scope
    claim: a string is split on spaces (OAuth 2 ``scope``, RFC 8693; Azure's ``scp``), a
    list is taken as it is (Okta's ``scp``); entries that are not valid charter scopes are
    dropped, never fixed up.
    """

    tenant_claim: str = "tenant_id"
    """The claim holding the caller's tenant; a token without it is refused."""

    scope_claims: tuple[str, ...] = ("scope", "scp")
    """The claims granting scopes; their scopes are combined."""

    actor_claim: str | None = None
    """The claim holding the caller's audience (``Principal.actor``); when set, a token
    without it is refused. None gives every caller ``actor``."""

    actor: str = "staff"
    """The audience of every caller when ``actor_claim`` is None."""

    kind: PrincipalKind = "person"
    """The principal kind of every caller when ``kind_claim`` is None (or the token lacks
    it). Only a ``person`` may decide approvals."""

    kind_claim: str | None = None
    """The claim naming the caller's kind (``person``, ``agent`` or ``service``), e.g. for an
    identity provider that issues tokens to agents; any other value refuses the token."""

    display_name_claim: str | None = "name"
    """The claim shown as the principal's display name, when it is a non-blank string."""

    def __post_init__(self) -> None:
        if isinstance(self.scope_claims, str):
            raise ConfigurationError(
                "ClaimMapping.scope_claims must be a list of claim names, "
                f"not the string {self.scope_claims!r}"
            )
        object.__setattr__(self, "scope_claims", tuple(self.scope_claims))
        for name in (self.tenant_claim, *self.scope_claims):
            if not isinstance(name, str) or not name:
                raise ConfigurationError("ClaimMapping claim names must be non-empty strings")
        if self.kind not in get_args(PrincipalKind):
            raise ConfigurationError(
                f"ClaimMapping.kind {self.kind!r} must be one of {get_args(PrincipalKind)}"
            )

    def __call__(self, claims: Mapping[str, Any]) -> Principal:
        """Build the principal from verified claims.

        Raises:
            TokenRejected: The tenant or actor claim is missing (``missing_claim``), or a
                claim is not a string or is blank or padded (``invalid_claim``).
        """
        tenant = _string_claim(claims, self.tenant_claim)
        actor = self.actor if self.actor_claim is None else _string_claim(claims, self.actor_claim)
        scopes = [entry for name in self.scope_claims for entry in _scope_entries(claims.get(name))]
        name = claims.get(self.display_name_claim) if self.display_name_claim else None
        kind = self.kind
        if self.kind_claim is not None and self.kind_claim in claims:
            claimed = claims[self.kind_claim]
            if claimed not in get_args(PrincipalKind):
                raise _reject(
                    "invalid_claim",
                    f"the {self.kind_claim!r} claim must be one of {get_args(PrincipalKind)}",
                )
            kind = claimed
        try:
            return Principal.from_claims(
                subject=claims["sub"],
                tenant_id=tenant,
                scopes=scopes,
                kind=kind,
                actor=actor,
                display_name=name if isinstance(name, str) and name.strip() else None,
            )
        except (KeyError, TypeError, ValueError):
            raise _reject(
                "invalid_claim", "the token's subject, tenant or actor is blank or padded"
            ) from None


def _string_claim(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if value is None:
        raise _reject("missing_claim", f"the token has no '{name}' claim")
    if not isinstance(value, str):
        raise _reject("invalid_claim", f"the token's '{name}' claim is not a string")
    return value


def _scope_entries(value: object) -> list[object]:
    if isinstance(value, str):
        # RFC 6749 3.3: scope tokens are separated by spaces (%x20), nothing else.
        return [entry for entry in value.split(" ") if entry]
    if isinstance(value, list | tuple):
        return list(value)
    return []


# --- Keys -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Key:
    """A verification key and the algorithms it may verify (the key decides, not the token)."""

    kid: str | None
    algorithms: frozenset[str]
    key: Any


class _KeySource(Protocol):
    async def find(self, kid: str | None) -> list[_Key]: ...


class _StaticKeys:
    """Keys given in code, found by ``kid``; a token without one only when there is one key.

    ``any_kid``: one key (``public_key``, ``secret``) verifies whatever ``kid`` is named.
    """

    def __init__(self, keys: Sequence[_Key], *, any_kid: bool) -> None:
        self._keys = list(keys)
        self._any_kid = any_kid

    async def find(self, kid: str | None) -> list[_Key]:
        if self._any_kid or (kid is None and len(self._keys) == 1):
            return self._keys
        return [key for key in self._keys if kid is not None and key.kid == kid]


def _jwk_keys(keyset: jwt.PyJWKSet, kid: str | None = None) -> list[_Key]:
    """The signing keys of a JWKS (all of them, or those named ``kid``)."""
    return [
        _Key(jwk.key_id, frozenset({jwk.algorithm_name}), jwk.key)
        for jwk in keyset.keys
        if jwk.public_key_use in ("sig", None) and (kid is None or jwk.key_id == kid)
    ]


class _RemoteKeys:
    """A JWKS URL, fetched and cached by PyJWT's ``PyJWKClient`` in a worker thread.

    A known ``kid`` is found in the cache without leaving the event loop. An unknown one
    refetches the set, at most once per ``cooldown`` seconds after the last fetch, and one
    lookup at a time: callers waiting meanwhile see the refreshed set, or the failure.
    """

    def __init__(self, url: str, *, lifespan: float, cooldown: float, timeout: float) -> None:
        self.url = url
        self._client = jwt.PyJWKClient(url, cache_jwk_set=True, lifespan=lifespan, timeout=timeout)
        self._cooldown = cooldown
        self._lock = asyncio.Lock()
        self._fetched_at = -math.inf
        self._failed_at = -math.inf

    def _cached(self, kid: str) -> list[_Key]:
        cache = self._client.jwk_set_cache
        keyset = cache.get() if cache is not None else None
        return [] if keyset is None else _jwk_keys(keyset, kid)

    async def find(self, kid: str | None) -> list[_Key]:
        if kid is None:
            return []  # a JWKS names its keys; a token that names none matches none
        found = self._cached(kid)
        if found:
            return found
        arrived = time.monotonic()
        async with self._lock:
            # A fetch failed while this call waited, or moments ago: fail now rather than
            # queue another behind an issuer that is down.
            if self._failed_at > arrived or time.monotonic() - self._failed_at < self._cooldown:
                raise _keys_unavailable()
            return await asyncio.to_thread(self._lookup, kid)

    def _lookup(self, kid: str) -> list[_Key]:
        # In a worker thread, one at a time (the lock): PyJWKClient blocks on the network.
        cache = self._client.jwk_set_cache
        if cache is not None and cache.get() is not None:  # else: first use, or expired
            found = self._cached(kid)
            if found or time.monotonic() - self._fetched_at < self._cooldown:
                return found
        try:
            keyset = self._client.get_jwk_set(refresh=True)
        except (jwt.PyJWTError, OSError, ValueError, http.client.HTTPException) as exc:
            self._failed_at = time.monotonic()
            logger.warning("charter.jwt: cannot fetch the JWKS at %r: %r", self.url, exc)
            raise _keys_unavailable() from None
        self._fetched_at = time.monotonic()
        return _jwk_keys(keyset, kid)


def _fits(key: PublicKey, algorithm: str) -> bool:
    """Whether a public key can verify an algorithm (RSA: RS/PS, EC: ES by curve, Ed: EdDSA)."""
    if isinstance(key, rsa.RSAPublicKey):
        return algorithm[:2] in ("RS", "PS")
    if isinstance(key, ec.EllipticCurvePublicKey):
        return _EC_CURVES.get(algorithm) == key.curve.name
    return algorithm == "EdDSA"


def _load_public_key(key: PublicKey | str | bytes) -> PublicKey:
    loaded: object = key
    if isinstance(key, str | bytes):
        try:
            loaded = load_pem_public_key(key.encode() if isinstance(key, str) else key)
        except ValueError as exc:
            raise ConfigurationError("public_key is not a PEM-encoded public key") from exc
    if not isinstance(loaded, PublicKey):
        raise ConfigurationError(
            "public_key must be an RSA, EC or Ed25519/Ed448 public key (not a private key)"
        )
    return loaded


def _check_url(url: str, what: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname in _LOOPBACK:
        return
    raise ConfigurationError(
        f"{what} {url!r} must be an https:// URL (http:// only on loopback, for tests)"
    )


def _check_seconds(*, least: float = 0, **values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= least):
            raise ConfigurationError(
                f"{name} must be a number of seconds >= {least}, not {value!r}"
            )


def _algorithms(algorithms: Sequence[str] | None, *, symmetric: bool) -> frozenset[str]:
    chosen = (
        algorithms if algorithms is not None else (("HS256",) if symmetric else DEFAULT_ALGORITHMS)
    )
    if isinstance(chosen, str):
        raise ConfigurationError(f"algorithms must be a list, not the string {chosen!r}")
    allowed = frozenset(chosen)
    known = set(jwt.algorithms.get_default_algorithms()) - {"none"}
    unknown = sorted(allowed - known)
    if not allowed or unknown:
        raise ConfigurationError(
            f"algorithms must name some of {sorted(known)}; not {unknown or 'nothing'}"
        )
    hmac = allowed & set(_HMAC_ALGORITHMS)
    if symmetric and hmac != allowed:
        raise ConfigurationError("with secret=, algorithms may name only HS256, HS384, HS512")
    if not symmetric and hmac:
        raise ConfigurationError(
            f"{sorted(hmac)} need a shared secret: pass secret= (and no public keys) to use them"
        )
    return allowed


# --- The authenticator ----------------------------------------------------------------------


class JwtAuthenticator:
    """An ``Authenticator`` for JWT bearer tokens from an OAuth 2 / OIDC issuer.

    A token must be signed, with an allowed algorithm, by a key that fits that algorithm,
    and carry ``iss`` (equal to ``issuer``), ``aud`` (naming one of ``audience``), ``exp``
    and ``sub``; ``nbf`` and ``iat`` are honoured when present, within ``leeway`` seconds.
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str | Sequence[str],
        jwks_url: str | None = None,
        jwks: Mapping[str, Any] | None = None,
        public_key: PublicKey | str | bytes | None = None,
        secret: str | bytes | None = None,
        algorithms: Sequence[str] | None = None,
        leeway: float = 30.0,
        claims_to_principal: ClaimsMapper | None = None,
        jwks_cache_seconds: float = 300.0,
        jwks_refresh_cooldown: float = 30.0,
        jwks_timeout: float = 5.0,
    ) -> None:
        """Configure the verifier; nothing is fetched until the first token arrives.

        Args:
            issuer: The exact ``iss`` every token must carry.
            audience: This server's identifier(s); a token's ``aud`` must name one.
            jwks_url: The issuer's JWKS URL (``https://``; ``http://`` only on loopback).
            jwks: A JWKS document (``{"keys": [...]}``) given in code.
            public_key: One public key (a ``cryptography`` key or PEM text); any ``kid``.
            secret: A shared HMAC secret, at least as long as the hash (32 bytes for HS256).
            algorithms: The accepted ``alg`` values. Default: ``DEFAULT_ALGORITHMS``, or
                ``("HS256",)`` with ``secret``. ``none`` is never accepted.
            leeway: Seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.
            claims_to_principal: Builds the principal from the verified claims. Default:
                ``ClaimMapping()`` (tenant from ``tenant_id``, scopes from ``scope``/``scp``).
            jwks_cache_seconds: How long a fetched JWKS is used before it is fetched again.
            jwks_refresh_cooldown: The least time between fetches forced by an unknown
                ``kid`` (and after a failed fetch); 0 refetches for every unknown ``kid``.
            jwks_timeout: Seconds a JWKS fetch may take.

        Raises:
            ConfigurationError: Not exactly one key source; a malformed key, JWKS or URL;
                an algorithm that is unknown, ``none``, HS* without ``secret`` or the reverse;
                a secret too short; a blank issuer or audience; a negative leeway.
        """
        sources = [s for s in (jwks_url, jwks, public_key, secret) if s is not None]
        if len(sources) != 1:
            raise ConfigurationError(
                "give exactly one of jwks_url=, jwks=, public_key= or secret= to JwtAuthenticator"
            )
        if not isinstance(issuer, str) or not issuer.strip():
            raise ConfigurationError("issuer must be the issuer's identifier (its 'iss' value)")
        audiences = [audience] if isinstance(audience, str) else list(audience)
        if not audiences or not all(isinstance(a, str) and a.strip() for a in audiences):
            raise ConfigurationError("audience must name this server (a non-blank string)")
        _check_seconds(leeway=leeway, jwks_refresh_cooldown=jwks_refresh_cooldown)
        _check_seconds(jwks_cache_seconds=jwks_cache_seconds, jwks_timeout=jwks_timeout, least=1)
        self._issuer = issuer
        self._audience = audiences
        self._leeway = leeway
        self._algorithms = _algorithms(algorithms, symmetric=secret is not None)
        self._to_principal: ClaimsMapper = claims_to_principal or ClaimMapping()
        self._keys: _KeySource
        if jwks_url is not None:
            _check_url(jwks_url, "jwks_url")
            self._source = f"jwks_url={jwks_url!r}"
            self._keys = _RemoteKeys(
                jwks_url,
                lifespan=jwks_cache_seconds,
                cooldown=jwks_refresh_cooldown,
                timeout=jwks_timeout,
            )
        elif jwks is not None:
            self._source = "jwks=<static>"
            self._keys = self._static_jwks(jwks)
        elif public_key is not None:
            self._source = "public_key=<static>"
            key = _load_public_key(public_key)
            fitting = frozenset(a for a in self._algorithms if _fits(key, a))
            if not fitting:
                raise ConfigurationError(
                    f"public_key cannot verify any of the algorithms {sorted(self._algorithms)}"
                )
            self._keys = _StaticKeys([_Key(None, fitting, key)], any_kid=True)
        else:
            assert secret is not None
            self._source = "secret=<redacted>"
            self._keys = self._secret(secret)

    def _static_jwks(self, jwks: Mapping[str, Any]) -> _StaticKeys:
        try:
            keyset = jwt.PyJWKSet.from_dict(dict(jwks))
        except (jwt.PyJWTError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigurationError(f"jwks is not a usable JWKS document: {exc}") from exc
        keys = [k for k in _jwk_keys(keyset) if k.algorithms <= self._algorithms]
        if not keys:
            raise ConfigurationError(
                f"jwks holds no signing key for the algorithms {sorted(self._algorithms)}"
            )
        return _StaticKeys(keys, any_kid=False)

    def _secret(self, secret: str | bytes) -> _StaticKeys:
        raw = secret.encode() if isinstance(secret, str) else secret
        shortest = max(_HMAC_ALGORITHMS[a] for a in self._algorithms)
        if len(raw) < shortest:
            raise ConfigurationError(
                f"secret must be at least {shortest} bytes for {sorted(self._algorithms)}"
            )
        return _StaticKeys([_Key(None, self._algorithms, raw)], any_kid=True)

    def __repr__(self) -> str:
        return (
            f"JwtAuthenticator(issuer={self._issuer!r}, audience={self._audience!r}, "
            f"{self._source}, algorithms={sorted(self._algorithms)})"
        )

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        """Verify the bearer token and map its claims to a principal.

        Args:
            credentials: What the transport received; only ``bearer`` is read.

        Returns:
            The principal, or None when no credentials were sent.

        Raises:
            TokenRejected: The token is not valid (``reason`` says why), or an API key was
                sent; see ``TokenFailure``.
        """
        token = credentials.bearer
        if token is None:
            if credentials.api_key is None:
                return None
            raise _reject("unsupported_credentials")
        if credentials.api_key is not None:
            raise _reject(
                "unsupported_credentials", "send either a bearer token or an API key, not both"
            )
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _reject("malformed") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self._algorithms:
            raise _reject("algorithm_not_allowed")
        candidates = await self._keys.find(header.get("kid"))
        if not candidates:
            raise _reject("unknown_key")
        key = next((k for k in candidates if algorithm in k.algorithms), None)
        if key is None:
            raise _reject("algorithm_not_allowed", "the token's algorithm does not fit its key")
        if isinstance(key.key, rsa.RSAPublicKey) and key.key.key_size < _MIN_RSA_BITS:
            raise _reject("unusable_key")  # PyJWT enforces this too, from some version on
        _check_numeric_dates(token)
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": _REQUIRED_CLAIMS, "enforce_minimum_key_length": True},
            )
        except jwt.PyJWTError as exc:
            raise _translate(exc) from None
        return await self._principal(claims)

    async def _principal(self, claims: dict[str, Any]) -> Principal:
        try:
            principal = self._to_principal(MappingProxyType(claims))
            if inspect.isawaitable(principal):
                principal = await principal
        except (TypeError, ValueError):
            raise _reject("invalid_claim") from None
        if not isinstance(principal, Principal):
            raise TypeError(
                f"claims_to_principal returned {type(principal).__name__}, not a Principal"
            )
        for what, value in (
            ("subject", principal.subject),
            ("tenant", principal.tenant_id),
            ("actor", principal.actor),
        ):
            if any(unicodedata.category(char) in _CONTROL_CATEGORIES for char in value):
                raise _reject("malformed", f"the token's {what} holds a control character")
        return principal


def _check_numeric_dates(token: str) -> None:
    """Refuse a token whose ``exp``, ``nbf`` or ``iat`` is not a plain NumericDate.

    PyJWT reads these claims with ``int()``, so it takes ``"1700000000"``, ``true`` and
    ``1e300`` (a token that never expires). A NumericDate here is a JSON number (not a
    string or a boolean), finite, from 0 to ``_LAST_NUMERIC_DATE``. Checked on the
    payload before the signature, like the token's other structure.

    Raises:
        TokenRejected: ``malformed``, naming the claim.
    """
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise _reject("malformed") from None
    for name in _TIME_CLAIMS:
        if name not in claims:
            continue
        value = claims[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value <= _LAST_NUMERIC_DATE
        ):
            raise _reject(
                "malformed",
                f"the token's '{name}' claim is not a NumericDate (seconds since 1970, a "
                "JSON number)",
            )


# --- OIDC discovery -------------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _fetch_json(url: str, timeout: float) -> object:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.build_opener(_NoRedirect()).open(request, timeout=timeout) as response:
        return json.loads(response.read(_MAX_DOCUMENT_BYTES))


async def discover_jwks_url(issuer: str, *, timeout: float = 5.0) -> str:
    """Read an OIDC issuer's JWKS URL from its discovery document, once, before serving.

    Fetches ``issuer + "/.well-known/openid-configuration"`` (OpenID Connect Discovery 1.0)
    in a worker thread and checks that the document names the same issuer.

    Args:
        issuer: The issuer identifier, as its tokens' ``iss`` reads.
        timeout: Seconds the fetch may take.

    Returns:
        The ``jwks_uri`` to pass as ``JwtAuthenticator(jwks_url=...)``.

    Raises:
        ConfigurationError: The issuer is not an https URL, the document cannot be fetched,
            or it names another issuer or no usable ``jwks_uri``.
    """
    _check_url(issuer, "issuer")
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        document = await asyncio.to_thread(_fetch_json, url, timeout)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise ConfigurationError(f"cannot read the OIDC discovery document {url}: {exc}") from exc
    if not isinstance(document, dict) or document.get("issuer") != issuer:
        raise ConfigurationError(f"the OIDC discovery document {url} names another issuer")
    jwks_uri = document.get("jwks_uri")
    if not isinstance(jwks_uri, str):
        raise ConfigurationError(f"the OIDC discovery document {url} has no jwks_uri")
    _check_url(jwks_uri, "jwks_uri")
    return jwks_uri
