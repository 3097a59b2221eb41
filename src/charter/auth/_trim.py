"""JavaScript's ``String.prototype.trim``, which the original system applied to ids."""

from __future__ import annotations

__all__ = ("js_trim",)

# JavaScript's String.prototype.trim strips WhiteSpace and LineTerminator code points.
# Python's str.strip() differs: it also strips U+001C..U+001F and U+0085, and keeps
# U+FEFF. Checked against Node 20 over every code point.
_JS_WHITESPACE = (
    "\t\n\v\f\r \xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(value: str) -> str:
    """Strip leading and trailing whitespace exactly as JavaScript's ``String.prototype.trim``.

    Args:
        value: The string to trim.

    Returns:
        ``value`` without the JavaScript whitespace and line terminators at either end.
        Unlike ``str.strip()``, U+FEFF is stripped and U+001C..U+001F and U+0085 are kept.
    """
    return value.strip(_JS_WHITESPACE)
