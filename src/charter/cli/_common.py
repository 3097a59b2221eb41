"""What every `charter` command shares: exit codes, options, one-line errors, consoles.

Commands translate foreign errors where they arise (a socket that will not bind, a server
that cannot be reached) into ``Unusable``; ``unusable_input`` prints any of those, and
charter's own configuration and store errors, as one line on stderr with exit status 2.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import typing
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer
from rich.console import Console

from charter.errors import CharterError

__all__ = (
    "DEFAULT_DB_URL",
    "EXIT_CHECK_FAILED",
    "EXIT_DENIED",
    "EXIT_OK",
    "EXIT_PENDING",
    "EXIT_UNUSABLE_INPUT",
    "DbOption",
    "DebugOption",
    "JsonOption",
    "KeyOption",
    "Reach",
    "ReachOption",
    "Unusable",
    "UrlOption",
    "chosen",
    "console",
    "display_url",
    "error_console",
    "parse_json_object",
    "parse_request_id",
    "resolve_db",
    "unusable_input",
    "with_reach",
)

_T = TypeVar("_T")

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
"""A check failed (`diff`, `lock --check`), or a call failed."""
EXIT_UNUSABLE_INPUT = 2
"""The command's input could not be used: a bad TARGET, JSON, URL, port or database."""
EXIT_PENDING = 3
"""A call is waiting for a person (confirmation, approval) or continues elsewhere."""
EXIT_DENIED = 4
"""A person refused the call (denied its approval, declined it) or its approval expired:
final for that request id."""

DEFAULT_DB_URL = "sqlite+aiosqlite:///.charter/charter.db"
"""The embedded store `charter serve` and friends use unless told otherwise."""

DebugOption = Annotated[
    bool, typer.Option("--debug", help="Show the full traceback when something goes wrong.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="CHARTER_DB",
        help=f"The store's database URL. Default: {DEFAULT_DB_URL}",
        show_default=False,
    ),
]
KeyOption = Annotated[
    str | None,
    typer.Option("--key", envvar="CHARTER_KEY", help="The API key to act as."),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Ask a running charter server (e.g. http://127.0.0.1:8700) instead of working "
        "in this process.",
    ),
]


@dataclasses.dataclass(frozen=True, slots=True)
class Reach:
    """As whom (`--key`) and where (`--url`, else `--db`) a command acts, and how it answers.

    The options most commands share, declared once: each field's annotation is its option.
    A command takes the ones it offers through ``with_reach``; the others keep these
    defaults (no key, no server, the default store, text).
    """

    key: KeyOption = None
    url: UrlOption = None
    db: DbOption = None
    json_output: JsonOption = False
    debug: DebugOption = False


ReachOption = Literal["key", "url", "db", "json_output"]
"""A ``Reach`` option a command may offer; ``debug`` is every command's."""


def _reach_options() -> dict[str, inspect.Parameter]:
    """``Reach``'s fields as the keyword parameters Typer makes its options from."""
    hints = typing.get_type_hints(Reach, include_extras=True)
    return {
        field.name: inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=field.default,
            annotation=hints[field.name],
        )
        for field in dataclasses.fields(Reach)
    }


_REACH_OPTIONS = _reach_options()


def with_reach(
    *options: ReachOption, trailing: tuple[ReachOption, ...] = ()
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command ``options`` and ``--debug`` as one ``Reach``, its ``reach`` parameter.

    Typer makes a command's options from its parameters, so without this every command
    would list the shared ones again and pass them on one by one. The command declares
    ``reach: Reach`` instead; the function this returns has, for Typer, the command's own
    parameters with ``options`` standing where ``reach`` stood, then ``trailing`` and
    ``--debug`` after the parameters that followed ``reach`` (``--help`` lists them in
    that order). It gathers those values into the ``Reach`` the command is called with.
    """

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        own = [*inspect.signature(command, eval_str=True).parameters.values()]
        at = [parameter.name for parameter in own].index("reach")
        offered = [*options, *trailing, "debug"]

        @functools.wraps(command)
        def run(**given: Any) -> None:
            reach = Reach(**{name: given.pop(name) for name in offered})
            command(**given, reach=reach)

        # Typer reads parameters with inspect.signature, which takes __signature__ as given.
        run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                *own[:at],
                *(_REACH_OPTIONS[name] for name in options),
                *own[at + 1 :],
                *(_REACH_OPTIONS[name] for name in [*trailing, "debug"]),
            ]
        )
        return run

    return decorate


class Unusable(Exception):
    """Raised by a command when its input cannot be used; printed as one line, exit 2."""


@contextlib.contextmanager
def unusable_input(debug: bool) -> Iterator[None]:
    """Turn a configuration or input problem into one line on stderr and exit status 2.

    Covers ``Unusable``, charter's own errors (``ConfigurationError``, ``StoreError``,
    ``SchemaMismatch``, ``AuthenticationFailed``) and a missing extra (``ImportError``,
    whose message names the ``pip install`` to run). With ``debug`` they propagate.
    """
    try:
        yield
    except (Unusable, CharterError, ImportError) as exc:
        if debug:
            raise
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(EXIT_UNUSABLE_INPUT) from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def console() -> Console:
    """A console on stdout (made per call: CliRunner swaps ``sys.stdout``)."""
    return Console(highlight=False)


def error_console() -> Console:
    """A console on stderr, for notes beside a result and for stdio servers."""
    return Console(highlight=False, stderr=True)


def chosen(option: str, value: str, choices: Mapping[str, _T]) -> _T:
    """What ``value`` names among an option's ``choices``; ``Unusable`` listing them if none."""
    if value not in choices:
        raise Unusable(f"{option} must be one of {', '.join(choices)}, not {value!r}")
    return choices[value]


def resolve_db(db: str | None) -> str:
    """The database URL to use: ``--db`` (or ``CHARTER_DB``), else the embedded default."""
    return db if db else DEFAULT_DB_URL


def parse_json_object(text: str, option: str) -> tuple[str, dict[str, Any]]:
    """Read a JSON object given on the command line, or ``@path`` to read it from a file.

    Returns:
        The JSON text exactly as given (so the host applies its own limits to it) and the
        parsed object.

    Raises:
        Unusable: The text (or file) is not a JSON object.
    """
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise Unusable(f"{option}: cannot read {path}: {exc.strerror or exc}") from exc
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Unusable(f"{option} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise Unusable(f'{option} must be a JSON object, e.g. \'{{"trip_id": "trp_1"}}\'')
    return text, value


def parse_request_id(value: str | None) -> str | None:
    """Check ``--request-id``: a UUID, returned in canonical form.

    Raises:
        Unusable: It is not a UUID.
    """
    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise Unusable(
            f"--request-id must be a UUID (e.g. {uuid.uuid4()}), not {value!r}"
        ) from None


def display_url(url: str) -> str:
    """A URL (a database's, a server's) with its password replaced, for banners and messages."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    credentials, at, location = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{location}"
