"""`charter keys create|list|revoke` and `charter db upgrade|prune`: the store, administered."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, TypeVar, get_args

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from charter.auth import PrincipalKind
from charter.cli._common import (
    EXIT_CHECK_FAILED,
    Reach,
    Unusable,
    chosen,
    console,
    display_url,
    error_console,
    resolve_db,
    unusable_input,
    with_reach,
)

if TYPE_CHECKING:
    from charter.store import ApiKeyRecord, SqlStore

__all__ = (
    "create_key",
    "db_app",
    "keys_app",
    "list_keys",
    "parse_duration",
    "prune",
    "revoke_key",
    "upgrade",
)

keys_app = typer.Typer(
    help="Create, list and revoke the API keys kept in the store.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)
db_app = typer.Typer(
    help="The store's database: apply migrations, prune expired records.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

_T = TypeVar("_T")
_KINDS: dict[str, PrincipalKind] = {kind: kind for kind in get_args(PrincipalKind)}
_DURATION = re.compile(r"^\s*(\d{1,6})\s*([smhd])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _with_store(
    reach: Reach, work: Callable[[SqlStore], Awaitable[_T]], *, create: bool = False
) -> _T:
    async def run() -> _T:
        from charter.cli._host import open_store  # the host's modules: not for --help

        async with open_store(resolve_db(reach.db), create=create) as store:
            return await work(store)

    return asyncio.run(run())


# --- charter keys -----------------------------------------------------------------------------


@keys_app.command("create")
@with_reach("db", "json_output")
def create_key(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant the key acts for.")],
    subject: Annotated[
        str, typer.Option("--subject", help="Who the key stands for (a person, agent or job).")
    ],
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="A granted scope such as 'trips:read'; repeatable."),
    ] = None,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help=f"Who holds the key: {', '.join(_KINDS)}. Only person keys decide approvals.",
        ),
    ] = "agent",
    name: Annotated[str | None, typer.Option("--name", help="A label for people.")] = None,
    expires_in: Annotated[
        str | None,
        typer.Option("--expires-in", help="When the key stops working, e.g. 90d, 12h, 30m."),
    ] = None,
    *,
    reach: Reach,
) -> None:
    """Create an API key and print it. This is the only time the secret is shown.

    The key alone goes to stdout, so `KEY=$(charter keys create …)` keeps it; the
    details go to stderr.
    """
    with unusable_input(reach.debug):
        holder = chosen("--kind", kind, _KINDS)
        expires_at = datetime.now(UTC) + parse_duration(expires_in) if expires_in else None

        async def create(store: SqlStore) -> tuple[str, ApiKeyRecord]:
            try:
                return await store.create_api_key(
                    tenant_id=tenant,
                    subject=subject,
                    scopes=scope or [],
                    kind=holder,
                    name=name,
                    expires_at=expires_at,
                )
            except ValueError as exc:
                raise Unusable(str(exc)) from exc

        secret, record = _with_store(reach, create, create=True)
    if reach.json_output:
        typer.echo(json.dumps({"key": secret, **record.model_dump(mode="json")}, indent=2))
        return
    typer.echo(secret)
    scopes = " ".join(record.scopes) or "no scopes"
    note = Text(
        f"created key {record.id} for {record.subject} in tenant {record.tenant_id} ({scopes})"
    )
    if record.expires_at is not None:
        note.append(f", expires {record.expires_at.isoformat(timespec='seconds')}")
    notes = error_console()
    notes.print(note)
    if record.kind != "person" and "charter:approve" in record.scopes:
        notes.print(
            Text(
                f"This {record.kind} key holds charter:approve but cannot decide approvals: "
                "only person keys can (--kind person).",
                style="yellow",
            )
        )
    notes.print(Text("This is the only time the key is shown; store it now.", style="yellow"))


@keys_app.command("list")
@with_reach("db", "json_output")
def list_keys(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's keys.")] = None,
    *,
    reach: Reach,
) -> None:
    """List the API keys (never their secrets), oldest first."""
    with unusable_input(reach.debug):
        records = _with_store(reach, lambda store: store.list_api_keys(tenant))
    if reach.json_output:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
        return
    now = datetime.now(UTC)
    table = Table(title=Text(_count(len(records), "API key"), style="bold"), title_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("who", overflow="fold")
    table.add_column("scopes", overflow="fold")
    table.add_column("created", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for record in records:
        if record.revoked_at is not None:
            state = Text("revoked", style="red")
        elif not record.active(now):
            state = Text("expired", style="red")
        elif record.expires_at is not None:
            state = Text(f"until {record.expires_at:%Y-%m-%d}", style="green")
        else:
            state = Text("active", style="green")
        who = Text(f"{record.subject}@{record.tenant_id}")
        who.append(f"\n{record.kind}" + (f": {record.name}" if record.name else ""), style="dim")
        table.add_row(
            record.id,
            who,
            "\n".join(record.scopes) or "-",
            f"{record.created_at:%Y-%m-%d}",
            state,
        )
    console().print(table)


@keys_app.command("revoke")
@with_reach("db")
def revoke_key(
    key_id: Annotated[
        str, typer.Argument(metavar="KEY_ID", help="The key's id (the <id> in chk_<id>_…).")
    ],
    *,
    reach: Reach,
) -> None:
    """Revoke an API key: running servers refuse it within 5 s (they remember keys 5 s)."""
    with unusable_input(reach.debug):
        revoked = _with_store(reach, lambda store: store.revoke_api_key(key_id))
    if not revoked:
        typer.echo(f"no active key {key_id!r} (unknown, or already revoked)", err=True)
        raise typer.Exit(EXIT_CHECK_FAILED)
    console().print(Text(f"revoked key {key_id}"))


def _count(n: int, noun: str) -> str:
    return f"1 {noun}" if n == 1 else f"{n} {noun}s"


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``30m`` or ``45s`` as a ``timedelta``.

    Raises:
        Unusable: The text is not such a duration, or it is zero.
    """
    match = _DURATION.match(text)
    if match is None or int(match.group(1)) == 0:
        raise Unusable(f"--expires-in must look like 90d, 12h, 30m or 45s, not {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


# --- charter db -------------------------------------------------------------------------------


@contextmanager
def _progress(description: str) -> Iterator[None]:
    """A spinner with the elapsed time on stderr while long work runs (gone when it ends).

    Only on a terminal: elsewhere rich would leave an empty line before an error's one.
    """
    stderr = error_console()
    if not stderr.is_terminal:
        yield
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=stderr, transient=True) as progress:
        progress.add_task(description, total=None)
        yield


@db_app.command("upgrade")
@with_reach("db")
def upgrade(*, reach: Reach) -> None:
    """Apply charter's pending migrations to the database (creating it if it is new)."""
    url = resolve_db(reach.db)
    with unusable_input(reach.debug), _progress(f"migrating {display_url(url)}"):
        asyncio.run(_upgrade(url))
    console().print(Text(f"{display_url(url)} is at charter's current schema", style="green"))


async def _upgrade(url: str) -> None:
    from charter.cli._host import driver_reason, prepare_sqlite_folder
    from charter.store import SqlStore, StoreError

    prepare_sqlite_folder(url)
    store = SqlStore(url)
    try:
        await store.upgrade()
    except StoreError as exc:
        raise Unusable(f"cannot migrate {display_url(url)}: {driver_reason(exc)}") from exc
    finally:
        await store.aclose()


@db_app.command("prune")
@with_reach("db", "json_output")
def prune(
    before: Annotated[
        datetime | None,
        typer.Option(
            "--before",
            formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"],
            help="Delete what expired before this moment (UTC unless it says). Default: now.",
        ),
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Rows per short write transaction.")
    ] = 500,
    anonymous_audit_days: Annotated[
        int,
        typer.Option(
            "--anonymous-audit-days",
            min=0,
            help="Keep audit events of anonymous calls (refusals, public tools) this long.",
        ),
    ] = 7,
    audit_days: Annotated[
        int | None,
        typer.Option(
            "--audit-days", min=1, help="Keep every audit event this long. Default: forever."
        ),
    ] = None,
    effect_days: Annotated[
        float,
        typer.Option(
            "--effect-days",
            min=0,
            help="Keep delivered and discarded effects this long after they finished.",
        ),
    ] = 1,
    *,
    reach: Reach,
) -> None:
    """Delete expired completed requests and decided approvals, and old audit events.

    Rate-limit buckets that have refilled completely go too (they mean the same as none),
    and delivered or discarded effects `--effect-days` (1) after they finished,
    and the events of resumable MCP streams past their retention.
    Pending and approved approvals, deferred requests, pending and dead effects and API
    keys are never touched. Audit events of anonymous calls go after
    `--anonymous-audit-days` (7), the others only with `--audit-days`.
    """
    moment = before or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    url = resolve_db(reach.db)
    retention = _Retention(
        anonymous=moment - timedelta(days=anonymous_audit_days),
        everyone=moment - timedelta(days=audit_days) if audit_days is not None else None,
        effects=moment - timedelta(days=effect_days),
    )
    with unusable_input(reach.debug), _progress(f"pruning {display_url(url)}"):
        pruned = asyncio.run(_prune(url, moment, batch_size, retention))
    if reach.json_output:
        typer.echo(
            json.dumps(
                {
                    "deleted": pruned.records,
                    "effectsDeleted": pruned.effects,
                    "auditEventsDeleted": pruned.events,
                    "before": moment.isoformat(),
                }
            )
        )
        return
    console().print(
        Text(
            f"deleted {pruned.records} expired records"
            f" (before {moment.isoformat(timespec='seconds')}),"
            f" {pruned.effects} finished effects and {pruned.events} audit events"
        )
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Retention:
    anonymous: datetime
    """Anonymous calls' events older than this go."""
    everyone: datetime | None
    """Every event older than this goes (None: kept)."""
    effects: datetime
    """Delivered and discarded effects that finished before this go."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Pruned:
    records: int
    """Ledger entries, approvals and full rate-limit buckets."""
    effects: int
    events: int


async def _prune(url: str, before: datetime, batch_size: int, retention: _Retention) -> _Pruned:
    from charter.cli._host import open_store  # the host's modules: not for --help

    async with open_store(url, create=False) as store:
        deleted = await store.prune(before, batch_size=batch_size)
        effects = await store.prune_effects(retention.effects, batch_size=batch_size)
        events = await store.prune_audit(
            retention.anonymous, anonymous_only=True, batch_size=batch_size
        )
        if retention.everyone is not None:
            events += await store.prune_audit(retention.everyone, batch_size=batch_size)
        # Full buckets mean the same as none; "now", not --before, so no spent one goes.
        deleted += await store.prune_budgets(now=datetime.now(UTC).timestamp())
        return _Pruned(records=deleted, effects=effects, events=events)
