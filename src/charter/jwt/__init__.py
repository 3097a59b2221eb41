"""JWT / OIDC bearer tokens as an ``Authenticator``, verified with PyJWT.

Needs the ``jwt`` extra: ``pip install 'charter[jwt]'`` (PyJWT with ``cryptography``).
``docs/auth.md`` describes the configuration, the claim mapping and every failure reason.

Import every name from ``charter.jwt``; the modules behind it are private:

- ``_authenticator``: ``JwtAuthenticator``, which verifies a token and maps its claims.
- ``_claims``: claims to a principal (``ClaimsMapper``, the default ``ClaimMapping``).
- ``_keys``: verification keys given in code or read from a JWKS document, and which
  algorithms a key fits (``PublicKey``).
- ``_jwks``: a JWKS URL, fetched in a worker thread and cached.
- ``_discovery``: ``discover_jwks_url``, OIDC discovery before serving.
- ``_checks``: the claim checks PyJWT does not make (NumericDates, control characters).
- ``_config``: checks on the configuration (``DEFAULT_ALGORITHMS``, URLs, durations).
- ``_rejections``: why a token is refused (``TokenFailure``, ``TokenRejected``) and
  PyJWT's errors mapped to those reasons.
"""

from __future__ import annotations

try:
    import jwt  # noqa: F401
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "charter.jwt needs PyJWT with cryptography: pip install 'charter[jwt]'"
    ) from exc

from ._authenticator import JwtAuthenticator as JwtAuthenticator
from ._claims import ClaimMapping as ClaimMapping
from ._claims import ClaimsMapper as ClaimsMapper
from ._config import DEFAULT_ALGORITHMS as DEFAULT_ALGORITHMS
from ._discovery import discover_jwks_url as discover_jwks_url
from ._keys import PublicKey as PublicKey
from ._rejections import TokenFailure as TokenFailure
from ._rejections import TokenRejected as TokenRejected

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
