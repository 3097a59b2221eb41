"""``JwtAuthenticator``: verifies a bearer token and maps its claims to a principal."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from ..auth import AuthenticationFailed, Credentials, Principal, presented_token
from ..errors import ConfigurationError
from ._checks import check_numeric_dates
from ._claims import ClaimMapping, ClaimsMapper
from ._config import HMAC_ALGORITHMS, allowed_algorithms, check_seconds, check_url
from ._jwks import RemoteKeys
from ._keys import (
    KeySource,
    PublicKey,
    StaticKeys,
    VerificationKey,
    jwk_keys,
    key_fits,
    load_public_key,
)
from ._rejections import reject, translate_pyjwt_error

__all__ = ("JwtAuthenticator",)

_REQUIRED_CLAIMS = ["exp", "iss", "aud", "sub"]
_MIN_RSA_BITS = 2048


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
            jwks_timeout: Seconds a JWKS fetch may take, in all.

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
        check_seconds(leeway=leeway, jwks_refresh_cooldown=jwks_refresh_cooldown)
        check_seconds(jwks_cache_seconds=jwks_cache_seconds, jwks_timeout=jwks_timeout, least=1)
        self._issuer = issuer
        self._audience = audiences
        self._leeway = leeway
        self._algorithms = allowed_algorithms(algorithms, symmetric=secret is not None)
        self._to_principal: ClaimsMapper = claims_to_principal or ClaimMapping()
        self._keys: KeySource
        if jwks_url is not None:
            check_url(jwks_url, "jwks_url")
            self._source = f"jwks_url={jwks_url!r}"
            self._keys = RemoteKeys(
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
            key = load_public_key(public_key)
            fitting = frozenset(a for a in self._algorithms if key_fits(key, a))
            if not fitting:
                raise ConfigurationError(
                    f"public_key cannot verify any of the algorithms {sorted(self._algorithms)}"
                )
            self._keys = StaticKeys([VerificationKey(None, fitting, key)], any_kid=True)
        else:
            assert secret is not None
            self._source = "secret=<redacted>"
            self._keys = self._secret(secret)

    def _static_jwks(self, jwks: Mapping[str, Any]) -> StaticKeys:
        try:
            keyset = jwt.PyJWKSet.from_dict(dict(jwks))
        except (jwt.PyJWTError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigurationError(f"jwks is not a usable JWKS document: {exc}") from exc
        keys = [k for k in jwk_keys(keyset) if k.algorithms <= self._algorithms]
        if not keys:
            raise ConfigurationError(
                f"jwks holds no signing key for the algorithms {sorted(self._algorithms)}"
            )
        return StaticKeys(keys, any_kid=False)

    def _secret(self, secret: str | bytes) -> StaticKeys:
        raw = secret.encode() if isinstance(secret, str) else secret
        shortest = max(HMAC_ALGORITHMS[a] for a in self._algorithms)
        if len(raw) < shortest:
            raise ConfigurationError(
                f"secret must be at least {shortest} bytes for {sorted(self._algorithms)}"
            )
        return StaticKeys([VerificationKey(None, self._algorithms, raw)], any_kid=True)

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
        try:
            token = presented_token(credentials)
        except AuthenticationFailed as both:
            raise reject("unsupported_credentials", str(both)) from None
        if token is None:
            return None
        if credentials.bearer is None:
            raise reject("unsupported_credentials")  # an API key
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise reject("malformed") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self._algorithms:
            raise reject("algorithm_not_allowed")
        candidates = await self._keys.find(header.get("kid"))
        if not candidates:
            raise reject("unknown_key")
        key = next((k for k in candidates if algorithm in k.algorithms), None)
        if key is None:
            raise reject("algorithm_not_allowed", "the token's algorithm does not fit its key")
        if isinstance(key.key, rsa.RSAPublicKey) and key.key.key_size < _MIN_RSA_BITS:
            raise reject("unusable_key")  # PyJWT enforces this too, from some version on
        check_numeric_dates(token)
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
            raise translate_pyjwt_error(exc) from None
        return await self._principal(claims)

    async def _principal(self, claims: dict[str, Any]) -> Principal:
        try:
            principal = self._to_principal(MappingProxyType(claims))
            if inspect.isawaitable(principal):
                principal = await principal
        except (TypeError, ValueError):
            # Principal itself refuses a blank, padded or control-character identity.
            raise reject("invalid_claim") from None
        if not isinstance(principal, Principal):
            raise TypeError(
                f"claims_to_principal returned {type(principal).__name__}, not a Principal"
            )
        return principal
