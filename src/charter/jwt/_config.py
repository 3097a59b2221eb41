"""Checks on the authenticator's configuration: URLs, durations and algorithms."""

from __future__ import annotations

import math
from collections.abc import Sequence
from urllib.parse import urlsplit

import jwt

from ..errors import ConfigurationError

__all__ = (
    "DEFAULT_ALGORITHMS",
    "HMAC_ALGORITHMS",
    "allowed_algorithms",
    "check_seconds",
    "check_url",
)

DEFAULT_ALGORITHMS: tuple[str, ...] = ("RS256", "ES256")
"""The algorithms accepted when keys are public and ``algorithms`` is not given."""

HMAC_ALGORITHMS = {"HS256": 32, "HS384": 48, "HS512": 64}
"""Each HMAC algorithm and the shortest secret it accepts (its hash size, RFC 7518 3.2)."""

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def check_url(url: str, what: str) -> None:
    """Refuse a URL that is not https (http only on loopback): ``ConfigurationError``."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname in _LOOPBACK:
        return
    raise ConfigurationError(
        f"{what} {url!r} must be an https:// URL (http:// only on loopback, for tests)"
    )


def check_seconds(*, least: float = 0, **values: float) -> None:
    """Refuse a duration that is not a finite number of seconds >= ``least``."""
    for name, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= least):
            raise ConfigurationError(
                f"{name} must be a number of seconds >= {least}, not {value!r}"
            )


def allowed_algorithms(algorithms: Sequence[str] | None, *, symmetric: bool) -> frozenset[str]:
    """The algorithms a token may use: known, never ``none``, HS* exactly with a secret."""
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
    hmac = allowed & set(HMAC_ALGORITHMS)
    if symmetric and hmac != allowed:
        raise ConfigurationError("with secret=, algorithms may name only HS256, HS384, HS512")
    if not symmetric and hmac:
        raise ConfigurationError(
            f"{sorted(hmac)} need a shared secret: pass secret= (and no public keys) to use them"
        )
    return allowed
