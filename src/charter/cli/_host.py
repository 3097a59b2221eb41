"""Open a command's TARGET as a `Host`, with an opened `SqlStore` when it needs one.

TARGET is `module:attribute` naming a `Host` (used as it is, with its own store), a
`Registry` (served by a host on the store, authenticating the store's API keys), or a
factory of either, sync or async; a factory with a ``store`` parameter gets the opened
`SqlStore`. Everything opened here closes when the caller's exit stack does.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from charter._target import import_target, required_parameters
from charter.auth import Credentials, Principal
from charter.cli._common import (
    DEFAULT_DB_URL,
    Unusable,
    display_url,
    error_console,
    resolve_db,
)
from charter.errors import ConfigurationError
from charter.host import Host
from charter.notify import Notifier
from charter.registry import Registry

if TYPE_CHECKING:
    from charter.gateway import Gateway
    from charter.store import SqlStore

__all__ = (
    "OpenedHost",
    "driver_reason",
    "open_host",
    "open_served",
    "open_store",
    "prepare_sqlite_folder",
    "principal_for",
    "sqlite_path",
)

STORE_PARAMETER = "store"
"""A factory parameter of this name receives the opened `SqlStore`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenedHost:
    """A host ready to serve, and the store the command opened for it (if any)."""

    host: Host
    store: SqlStore | None
    """The store the command opened; None when the target is a `Host` with its own."""
    db_url: str | None
    """The URL of ``store``, for messages."""
    gateway: Gateway | None = None
    """The running gateway of ``--upstreams``, if any."""


async def open_host(
    spec: str,
    db: str | None,
    stack: AsyncExitStack,
    *,
    notifiers: Sequence[Notifier] = (),
    console_url: str | None = None,
) -> OpenedHost:
    """Import TARGET and turn it into a host, opening the store at ``db`` if it needs one.

    ``notifiers`` and ``console_url`` go to the host built for a registry; a TARGET that
    is a host (or makes one) takes them as ``Host(notifiers=, console_url=)`` itself.

    Raises:
        ConfigurationError: TARGET is malformed, is not a host, registry or factory, or
            its factory fails.
        Unusable: The database cannot be opened.
        SchemaMismatch: The database schema must be upgraded first.
    """
    target = import_target(spec)
    if isinstance(target, Host):
        _no_notify_options(spec, notifiers, console_url)
        if db is not None:
            error_console().print(
                f"note: --db is not used: {spec} is a Host with its own store", highlight=False
            )
        return OpenedHost(host=target, store=None, db_url=None)
    return await _open_target(spec, target, db, stack, notifiers=notifiers, console_url=console_url)


async def open_served(
    spec: str | None,
    upstreams: str | None,
    db: str | None,
    stack: AsyncExitStack,
    *,
    notifiers: Sequence[Notifier] = (),
    console_url: str | None = None,
) -> OpenedHost:
    """TARGET's host (or, without one, a host on the store), with the upstreams' tools.

    ``upstreams`` names a gateway file (``charter.gateway.load_config``); its tools are
    registered in the host's registry and stay in step until ``stack`` closes.
    ``notifiers`` and ``console_url`` as for ``open_host``.

    Raises:
        ConfigurationError: TARGET or the upstreams file is not usable.
        Unusable: Neither was given, or the database cannot be opened.
    """
    if spec is None and upstreams is None:
        raise Unusable("give TARGET (module:attribute), --upstreams FILE, or both")
    notify: dict[str, Any] = {"notifiers": notifiers, "console_url": console_url}
    config = None
    if upstreams is not None:
        from charter.gateway import load_config

        config = load_config(upstreams)  # a mistake in the file, before anything opens
    if spec is not None:
        opened = await open_host(spec, db, stack, **notify)
    else:
        opened = await _open_target("--upstreams", Registry(), db, stack, **notify)
    if config is not None:
        from charter.gateway import Gateway

        gateway = Gateway(config, opened.host.registry)
        await stack.enter_async_context(gateway)
        opened = dataclasses.replace(opened, gateway=gateway)
    return opened


async def _open_target(
    spec: str,
    target: object,
    db: str | None,
    stack: AsyncExitStack,
    *,
    notifiers: Sequence[Notifier],
    console_url: str | None,
) -> OpenedHost:
    url = resolve_db(db)
    opened: list[SqlStore] = []

    async def store() -> SqlStore:
        if not opened:
            opened.append(await stack.enter_async_context(open_store(url)))
        return opened[0]

    if isinstance(target, Registry):
        built: object = target
    elif callable(target):
        built = await _call_factory(spec, target, store)
    else:
        raise ConfigurationError(
            f"{spec!r} is a {type(target).__name__}, not a Host, a Registry or a factory of one"
        )
    if isinstance(built, Host):
        stack.push_async_callback(built.aclose)
        _no_notify_options(spec, notifiers, console_url)
        return OpenedHost(host=built, store=opened[0] if opened else None, db_url=url)
    if not isinstance(built, Registry):
        raise ConfigurationError(
            f"the factory {spec!r} returned a {type(built).__name__}, not a Host or a Registry"
        )
    from charter.store import ApiKeyAuthenticator

    sql = await store()
    host = Host(
        built,
        store=sql,
        authenticator=ApiKeyAuthenticator(sql),
        notifiers=notifiers,
        console_url=console_url,
    )
    stack.push_async_callback(host.aclose)
    return OpenedHost(host=host, store=sql, db_url=url)


def _no_notify_options(spec: str, notifiers: Sequence[Notifier], console_url: str | None) -> None:
    if notifiers or console_url is not None:
        raise Unusable(
            f"--notify and --public-url apply when TARGET is a Registry (or makes one); "
            f"{spec} makes its own Host: pass Host(notifiers=..., console_url=...) there"
        )


async def _call_factory(
    spec: str, factory: Callable[..., object], store: Callable[[], Awaitable[SqlStore]]
) -> object:
    needed = [name for name in required_parameters(factory) if name != STORE_PARAMETER]
    if needed:
        raise ConfigurationError(
            f"the factory {spec!r} needs arguments charter cannot supply ({', '.join(needed)}); "
            f"it may take `{STORE_PARAMETER}`, the opened SqlStore"
        )
    kwargs: dict[str, object] = {}
    if _accepts(factory, STORE_PARAMETER):
        kwargs[STORE_PARAMETER] = await store()
    try:
        result = factory(**kwargs)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:
        # Anything the user's factory raises is a target problem; --debug shows the cause.
        raise ConfigurationError(f"calling the factory {spec!r} failed: {exc!r}") from exc
    return result


def _accepts(factory: Callable[..., object], name: str) -> bool:
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    parameter = parameters.get(name)
    return parameter is not None and parameter.kind is not parameter.POSITIONAL_ONLY


@asynccontextmanager
async def open_store(url: str, *, create: bool = True) -> AsyncIterator[SqlStore]:
    """Open the `SqlStore` at ``url`` (creating the default `.charter/` folder) and close it.

    ``create=False``: a SQLite file that does not exist is refused, not created: a command
    that only reads or changes what is there (``keys list``, ``approvals``) would otherwise
    answer from a new, empty database made from a mistyped path.

    Raises:
        ConfigurationError: The URL is not one `SqlStore` supports.
        ImportError: The database driver is missing (the message names the extra).
        SchemaMismatch: The schema is behind; the message says to run `charter db upgrade`.
        Unusable: The database cannot be reached, its file cannot be created, or (with
            ``create=False``) it does not exist.
    """
    from charter.store import SchemaMismatch, SqlStore, StoreError

    path = sqlite_path(url)
    if not create and path is not None and not path.exists():
        raise Unusable(
            f"no database at {path}: check --db (`charter db upgrade --db …` creates one)"
        )
    prepare_sqlite_folder(url)
    store = SqlStore(url)
    try:
        await store.open()
    except SchemaMismatch:
        raise
    except StoreError as exc:
        raise Unusable(
            f"cannot open the database {display_url(url)}: {driver_reason(exc)}"
        ) from exc
    try:
        yield store
    finally:
        await store.aclose()


def prepare_sqlite_folder(url: str) -> None:
    """Create the default database's folder, and a new SQLite file, readable by its owner only.

    The database holds every tenant's approvals with their arguments, the audit trail,
    stored outcomes and the key that seals MCP request state, so a file the CLI creates is
    ``0600`` (SQLite gives its WAL files the same mode) and the default `.charter/` folder
    ``0700``. An existing file keeps its mode.

    Raises:
        Unusable: ``url`` names a SQLite file whose folder does not exist, or that cannot
            be created there (permissions, a read-only or special file system).
    """
    path = sqlite_path(url)
    if path is None:
        return
    if url == DEFAULT_DB_URL:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    elif not path.parent.is_dir():
        raise Unusable(f"cannot open the database {url}: the folder {path.parent} does not exist")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise Unusable(f"cannot create the database {path}: {exc.strerror or exc}") from None


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite ``url`` names; None for another database or an in-memory one."""
    scheme, sep, rest = url.partition(":///")
    if not sep or not scheme.startswith("sqlite"):
        return None
    path = Path(rest.partition("?")[0])
    if not str(path) or str(path) == ":memory:":
        return None
    return path


def driver_reason(exc: BaseException) -> str:
    """What the database driver said, from a `StoreError`'s cause (the store's own otherwise)."""
    cause = exc.__cause__
    original = getattr(cause, "orig", None) or cause
    return " ".join(str(original or exc).split())


async def principal_for(host: Host, key: str | None) -> Principal | None:
    """The principal an API key authenticates as on ``host`` (None without a key).

    Raises:
        AuthenticationFailed: The key is not valid.
        Unusable: A key was given but the host has no authenticator.
    """
    if key is None:
        return None
    if host.authenticator is None:
        raise Unusable("--key was given, but this host has no authenticator to check it")
    return await host.authenticate(Credentials(api_key=key))
