r"""Log records that text from callers and handlers cannot forge.

charter logs untrusted text (a handler's message, an exception's text, a requested tool
name) only as a value: with ``%r`` in the message, so a newline in it stays ``\n`` on
the record's line. An exception's traceback is the one place Python prints its text as it
is; ``log_exception`` gives the record a traceback text (``exc_text``, what a standard
``logging.Formatter`` prints) with each exception's message escaped the same way, while
``exc_info`` stays intact for handlers that read the exception itself.
"""

from __future__ import annotations

import logging
import sys
import traceback
import unicodedata
from collections.abc import Callable, Iterator

__all__ = ("escape_line_breaks", "log_exception")

_KEEP = frozenset("\t")
_BREAKING = frozenset({"Cc", "Zl", "Zp"})
_HIDING = _BREAKING | {"Cf"}
"""With the format characters (bidi overrides, zero-width spaces), which change what a
line appears to say without breaking it."""


def _as_in_repr(char: str) -> str:
    return repr(char)[1:-1]


def escape_line_breaks(
    text: str,
    *,
    format_characters: bool = False,
    escape: Callable[[str], str] = _as_in_repr,
) -> str:
    r"""``text`` with every control and line-separator character escaped as in a repr.

    Tabs are kept; newlines, carriage returns, ``\x1b`` (terminal escapes), NUL, and the
    Unicode line and paragraph separators become ``\n``, ``\r``, ``\x1b``, ``\x00``,
    ``\u2028``, ``\u2029``.

    Args:
        text: the text.
        format_characters: escape format characters (Unicode category Cf: ``\u202e``,
            ``\u200b``) too, for text a person reads to decide something (a reversed
            "devorppa-erp OFC" reads "CFO pre-approved").
        escape: how one character is written (default: as in a repr; ``\u0085`` style
            for text inside a JSON string).
    """
    categories = _HIDING if format_characters else _BREAKING
    return "".join(
        escape(char) if char not in _KEEP and unicodedata.category(char) in categories else char
        for char in text
    )


def log_exception(
    logger: logging.Logger,
    message: str,
    *args: object,
    exc: BaseException | None = None,
    level: int = logging.ERROR,
) -> None:
    """Log ``message % args`` with a traceback of ``exc`` that no exception text can forge.

    Use it instead of ``logger.exception``; ``message`` is a constant and ``args`` are
    values (untrusted ones formatted with ``%r``).

    Args:
        logger: the logger to log on.
        message: the ``%``-format message, a constant.
        *args: its values.
        exc: the exception; the one being handled when not given.
        level: the record's level.
    """
    if exc is None:
        exc = sys.exc_info()[1]
    if not logger.isEnabledFor(level):
        return
    filename, lineno, function, _ = logger.findCaller(stacklevel=2)
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    record = logger.makeRecord(
        logger.name, level, filename, lineno, message, args, exc_info, function
    )
    if exc is not None:
        record.exc_text = _traceback_text(exc)
    logger.handle(record)


def _traceback_text(exc: BaseException) -> str:
    """The traceback ``logging.Formatter.formatException`` prints, exception texts escaped."""
    report = traceback.TracebackException.from_exception(exc)
    return "".join(_traceback_lines(report)).removesuffix("\n")


_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _traceback_lines(report: traceback.TracebackException) -> Iterator[str]:
    """``report.format()``, but each exception's text (message and notes) on one line.

    ``TracebackException`` has already cut reference cycles, so the chain ends.
    """
    chain: list[tuple[str | None, traceback.TracebackException]] = []
    current: traceback.TracebackException | None = report
    while current is not None:
        if current.__cause__ is not None:
            chain.append((_CAUSE, current))
            current = current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            chain.append((_CONTEXT, current))
            current = current.__context__
        else:
            chain.append((None, current))
            current = None
    for link, entry in reversed(chain):
        if link is not None:
            yield link
        if entry.stack:
            yield "Traceback (most recent call last):\n"
            yield from entry.stack.format()
        text = "".join(entry.format_exception_only()).removesuffix("\n")
        yield escape_line_breaks(text) + "\n"
        for number, member in enumerate(entry.exceptions or (), start=1):
            yield f"+---------------- {number} ----------------\n"
            for line in "".join(_traceback_lines(member)).splitlines(keepends=True):
                yield "| " + line
