"""`charter worker` delivers the effect outbox; `charter effects` lists, shows, re-drives."""

from __future__ import annotations

import asyncio
import json
import signal
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer
from rich.table import Table
from rich.text import Text

from charter.cli._common import (
    EXIT_CHECK_FAILED,
    Reach,
    Unusable,
    chosen,
    console,
    error_console,
    resolve_db,
    unusable_input,
    with_reach,
)
from charter.effects import EffectRecord, EffectStatus
from charter.outcome import Failed

if TYPE_CHECKING:  # the host and the store load when a command runs, not for --help
    from charter.host import EffectAction
    from charter.notify import Notifier

__all__ = ("discard", "effects_app", "list_effects", "retry", "show", "worker")

effects_app = typer.Typer(
    help="List, show, re-drive and discard effects in the store's outbox.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

_STATUSES: dict[str, EffectStatus | None] = {
    **{status: status for status in get_args(EffectStatus)},
    "all": None,
}
_STYLE = {"pending": "yellow", "delivered": "green", "dead": "red", "discarded": "dim"}

EffectKey = Annotated[str, typer.Argument(metavar="KEY", help="The effect's key (eff_…).")]


@with_reach("db")
def worker(
    target: Annotated[
        str,
        typer.Argument(
            metavar="TARGET",
            help="`module:attribute`: the Host (or factory) whose registry has the effects.",
        ),
    ],
    *,
    reach: Reach,
    once: Annotated[
        bool, typer.Option("--once", help="Deliver what is due now, then exit.")
    ] = False,
    poll: Annotated[
        float, typer.Option("--poll", min=0.01, help="Seconds between empty passes.")
    ] = 1.0,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Effects claimed per pass.")] = 50,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Effects attempted at once.")
    ] = 8,
    notify: Annotated[
        str | None,
        typer.Option(
            "--notify",
            envvar="CHARTER_NOTIFY",
            help="The approval notifiers' TOML file, as `charter serve --notify` has it: "
            "this worker retries their notifications.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Deliver due effects: claim them under a lease, retry with backoff, park dead ones.

    On PostgreSQL run as many workers, on as many machines, as you like (they skip each
    other's rows); on SQLite run one. Stops on Ctrl+C or SIGTERM after the attempts in
    flight; `--once` stops when nothing is due.
    """
    from charter.cli._notify_config import load_notifiers

    with unusable_input(reach.debug):
        notifiers = load_notifiers(notify) if notify is not None else []
        done = asyncio.run(_work(target, reach.db, once, poll, batch, concurrency, notifiers))
    error_console().print(f"{done} effect attempt{'s' if done != 1 else ''} made", highlight=False)


async def _work(
    target: str,
    db: str | None,
    once: bool,
    poll: float,
    batch: int,
    concurrency: int,
    notifiers: list[Notifier],
) -> int:
    from charter.cli._host import open_host

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with AsyncExitStack() as stack:
            opened = await open_host(target, db, stack, notifiers=notifiers)
            return await opened.host.effects.work(
                once=once, poll=poll, limit=batch, concurrency=concurrency, stop=stop
            )
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


@effects_app.command("list")
@with_reach("db", "json_output")
def list_effects(
    status: Annotated[
        str,
        typer.Option("--status", help=f"One of {', '.join(_STATUSES)}.", show_default=True),
    ] = "all",
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's.")] = None,
    request_id: Annotated[
        str | None, typer.Option("--request-id", help="Only those this request staged.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 100,
    *,
    reach: Reach,
) -> None:
    """List effects, newest first."""
    with unusable_input(reach.debug):
        wanted = chosen("--status", status, _STATUSES)
        records = asyncio.run(_list(resolve_db(reach.db), wanted, tenant, request_id, limit))
    if reach.json_output:
        typer.echo(json.dumps([_as_json(r) for r in records], indent=2))
        return
    table = Table(title=Text(f"{len(records)} effects", style="bold"), title_justify="left")
    for column in ("key", "name", "tenant", "status", "attempts", "request", "last error"):
        table.add_column(column, overflow="fold")
    for r in records:
        table.add_row(
            r.key,
            r.name,
            r.tenant_id,
            Text(r.status, style=_STYLE[r.status]),
            f"{r.attempts}/{r.max_attempts}",
            r.request_id or "",
            (r.last_error or "")[:80],
        )
    console().print(table)


@effects_app.command("show")
@with_reach("db")
def show(key: EffectKey, *, reach: Reach) -> None:
    """Show one effect as JSON (its payload, attempts, lease and last error)."""
    with unusable_input(reach.debug):
        record = asyncio.run(_get(resolve_db(reach.db), key))
        if record is None:
            raise Unusable(f"no effect {key!r} in the store")
    typer.echo(json.dumps(_as_json(record), indent=2))


@effects_app.command("retry")
@with_reach("db")
def retry(key: EffectKey, *, reach: Reach) -> None:
    """Re-drive a dead (or discarded) effect: pending again, with fresh attempts.

    A running worker delivers it on its next pass (`charter worker TARGET --once` does now).
    """
    with unusable_input(reach.debug):
        changed = asyncio.run(_change(resolve_db(reach.db), key, "retry"))
    _report(key, changed, "is pending again")


@effects_app.command("discard")
@with_reach("db")
def discard(key: EffectKey, *, reach: Reach) -> None:
    """Give up on a pending or dead effect: it is kept, and never run again."""
    with unusable_input(reach.debug):
        changed = asyncio.run(_change(resolve_db(reach.db), key, "discard"))
    _report(key, changed, "is discarded")


def _report(key: str, changed: EffectRecord | Failed, done: str) -> None:
    if isinstance(changed, Failed):
        typer.echo(f"error: {changed.message}", err=True)
        raise typer.Exit(EXIT_CHECK_FAILED)
    typer.echo(f"effect {key} {done}")


async def _list(
    url: str, status: EffectStatus | None, tenant: str | None, request_id: str | None, limit: int
) -> list[EffectRecord]:
    from charter.cli._host import open_store

    async with open_store(url, create=False) as store:
        return await store.list_effects(
            tenant_id=tenant, status=status, request_id=request_id, limit=limit
        )


async def _get(url: str, key: str) -> EffectRecord | None:
    from charter.cli._host import open_store

    async with open_store(url, create=False) as store:
        return await store.get_effect(key)


async def _change(url: str, key: str, action: EffectAction) -> EffectRecord | Failed:
    from charter.cli._host import open_store
    from charter.host import Host
    from charter.registry import Registry

    async with open_store(url, create=False) as store:
        # The operator who holds the database acts: audited with no subject.
        host = Host(Registry(), store=store)
        return await host.effects.change(key, action, by=None)


def _as_json(record: EffectRecord) -> dict[str, Any]:
    return record.model_dump(mode="json", by_alias=True)
