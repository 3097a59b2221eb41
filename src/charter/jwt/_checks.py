"""A check PyJWT does not make: NumericDate claims."""

from __future__ import annotations

import jwt

from ._rejections import reject

__all__ = ("check_numeric_dates",)

_TIME_CLAIMS = ("exp", "nbf", "iat")
_LAST_NUMERIC_DATE = 253_402_300_799
"""9999-12-31T23:59:59Z, the last second a NumericDate may name (Python's datetime range)."""


def check_numeric_dates(token: str) -> None:
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
        raise reject("malformed") from None
    for name in _TIME_CLAIMS:
        if name not in claims:
            continue
        value = claims[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value <= _LAST_NUMERIC_DATE
        ):
            raise reject(
                "malformed",
                f"the token's '{name}' claim is not a NumericDate (seconds since 1970, a "
                "JSON number)",
            )
