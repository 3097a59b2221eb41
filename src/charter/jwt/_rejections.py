"""Why a token is refused: the failure reasons, ``TokenRejected``, and PyJWT's errors mapped."""

from __future__ import annotations

from typing import Literal, TypeAlias

import jwt

from ..auth import AuthenticationFailed, AuthenticationUnavailable

__all__ = (
    "TokenFailure",
    "TokenRejected",
    "keys_unavailable",
    "reject",
    "translate_pyjwt_error",
)

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


def reject(reason: TokenFailure, message: str | None = None) -> TokenRejected:
    """The ``TokenRejected`` to raise for ``reason``, with its standard message unless given."""
    return TokenRejected(reason, message or _MESSAGES[reason])


def keys_unavailable() -> AuthenticationUnavailable:
    """The error to raise when the issuer's keys cannot be fetched (``keys_unavailable``)."""
    # Not a verdict on the token: transports answer 503 (retry), never 401.
    return AuthenticationUnavailable(
        "the issuer's signing keys cannot be fetched now; try again later",
        reason="keys_unavailable",
    )


def translate_pyjwt_error(exc: jwt.PyJWTError) -> TokenRejected:
    """PyJWT's error as a ``TokenRejected``; PyJWT's own message is never passed on."""
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return reject("missing_claim", f"the token has no '{exc.claim}' claim")
    for kind, reason in _PYJWT_FAILURES:
        if isinstance(exc, kind):
            return reject(reason)
    return reject("invalid_claim")
