"""Verification keys: keys given in code, keys read from a JWKS, and which algorithms fit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from ..errors import ConfigurationError

__all__ = (
    "KeySource",
    "PublicKey",
    "StaticKeys",
    "VerificationKey",
    "jwk_keys",
    "key_fits",
    "load_public_key",
)

PublicKey: TypeAlias = (
    rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey
)
"""A verification key ``JwtAuthenticator(public_key=...)`` takes (or its PEM text)."""

_EC_CURVES = {
    "ES256": "secp256r1",
    "ES384": "secp384r1",
    "ES512": "secp521r1",
    "ES521": "secp521r1",
    "ES256K": "secp256k1",
}


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """A verification key and the algorithms it may verify (the key decides, not the token)."""

    kid: str | None
    algorithms: frozenset[str]
    key: Any


class KeySource(Protocol):
    """Protocol: finds the keys that may verify a token naming ``kid`` (or none)."""

    async def find(self, kid: str | None) -> list[VerificationKey]: ...


class StaticKeys:
    """Keys given in code, found by ``kid``; a token without one only when there is one key.

    ``any_kid``: one key (``public_key``, ``secret``) verifies whatever ``kid`` is named.
    """

    def __init__(self, keys: Sequence[VerificationKey], *, any_kid: bool) -> None:
        self._keys = list(keys)
        self._any_kid = any_kid

    async def find(self, kid: str | None) -> list[VerificationKey]:
        if self._any_kid or (kid is None and len(self._keys) == 1):
            return self._keys
        return [key for key in self._keys if kid is not None and key.kid == kid]


def jwk_keys(keyset: jwt.PyJWKSet, kid: str | None = None) -> list[VerificationKey]:
    """The signing keys of a JWKS (all of them, or those named ``kid``)."""
    return [
        VerificationKey(jwk.key_id, frozenset({jwk.algorithm_name}), jwk.key)
        for jwk in keyset.keys
        if jwk.public_key_use in ("sig", None) and (kid is None or jwk.key_id == kid)
    ]


def key_fits(key: PublicKey, algorithm: str) -> bool:
    """Whether a public key can verify an algorithm (RSA: RS/PS, EC: ES by curve, Ed: EdDSA)."""
    if isinstance(key, rsa.RSAPublicKey):
        return algorithm[:2] in ("RS", "PS")
    if isinstance(key, ec.EllipticCurvePublicKey):
        return _EC_CURVES.get(algorithm) == key.curve.name
    return algorithm == "EdDSA"


def load_public_key(key: PublicKey | str | bytes) -> PublicKey:
    """A public key as given, or read from PEM text; raises ``ConfigurationError`` otherwise."""
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
