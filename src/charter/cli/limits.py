"""`charter limits`: how much of each rate limit and quota is spent, from the store."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from charter.cli._common import Reach, console, resolve_db, unusable_input, with_reach

if TYPE_CHECKING:
    from charter.ledger.budgets import BucketUsage

__all__ = ("limits",)


@with_reach("db", "json_output")
def limits(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only the budgets of calls for this tenant.")
    ] = None,
    *,
    reach: Reach,
) -> None:
    """Show the rate limits and quotas being spent: per tool, limit and holder.

    A holder is a principal (`tenant/subject`), a tenant (`tenant:<id>`) or a whole tool
    (`all`). Only budgets with units spent and not yet refilled are listed; the others are
    full. In-flight caps are counted in each server process and are not shown.
    """
    now = datetime.now(UTC).timestamp()
    with unusable_input(reach.debug):
        usages = asyncio.run(_usage(resolve_db(reach.db), now, tenant))
    if reach.json_output:
        typer.echo(json.dumps([_as_json(usage, now) for usage in usages], indent=2))
        return
    title = f"{len(usages)} budget{'s' if len(usages) != 1 else ''} in use"
    table = Table(title=Text(title, style="bold"), title_justify="left")
    table.add_column("tool", overflow="fold")
    table.add_column("limit", overflow="fold")
    table.add_column("holder", overflow="fold")
    table.add_column("used", justify="right", no_wrap=True)
    table.add_column("full again in", justify="right", no_wrap=True)
    for usage in usages:
        used, capacity = usage.used(now), usage.capacity
        style = "red" if used >= capacity else "yellow" if used * 2 >= capacity else "green"
        table.add_row(
            usage.bucket.tool,
            usage.bucket.limit,
            usage.bucket.holder,
            Text(f"{used}/{capacity}", style=style),
            f"{usage.arrival - now:.0f} s",
        )
    console().print(table)


async def _usage(url: str, now: float, tenant: str | None) -> list[BucketUsage]:
    from charter.cli._host import open_store  # the host's modules: not for --help

    async with open_store(url, create=False) as store:
        return await store.budget_usage(now=now, tenant=tenant)


def _as_json(usage: BucketUsage, now: float) -> dict[str, Any]:
    bucket = usage.bucket
    return {
        "tool": bucket.tool,
        "limit": bucket.limit,
        "holder": bucket.holder,
        "tenant": bucket.tenant,
        "used": usage.used(now),
        "capacity": usage.capacity,
        "fullIn": round(max(usage.arrival - now, 0.0), 3),
    }
