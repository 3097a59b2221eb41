"""`charter approvals list|show|grant|deny`: in the store, or on a server with `--url`.

Locally, `--key` acts as that key's principal through `host.approvals` (the same rules as
the console: approvers see their tenant, requesters their own requests, nobody approves
their own); without a key, `list --tenant` and `show` read the store directly, as the
operator who holds the database. Decisions always need an approver's key: they are a
person's, and audited as theirs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_args
from urllib.parse import quote

import typer
from pydantic.alias_generators import to_camel
from rich.table import Table
from rich.text import Text

from charter.cli._common import (
    Reach,
    Unusable,
    chosen,
    console,
    resolve_db,
    unusable_input,
    with_reach,
)
from charter.cli._outcome import render_outcome
from charter.cli._remote import Remote, problem_outcome
from charter.errors import ErrorCode
from charter.outcome import ApprovalStatus, Failed, failed, not_found

if TYPE_CHECKING:  # the local path's modules load when it runs: --url needs none of them
    from charter.auth import Principal
    from charter.host import Host
    from charter.ledger import ApprovalRecord, LedgerStore

__all__ = ("approvals_app", "deny", "grant", "list_approvals", "show")

approvals_app = typer.Typer(
    help="List, show, grant and deny approvals: in the store, or on a server with --url.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

_T = TypeVar("_T")
_STATUSES: dict[str, ApprovalStatus | None] = {
    **{status: status for status in get_args(ApprovalStatus)},
    "all": None,
}

ApprovalId = Annotated[str, typer.Argument(metavar="APPROVAL_ID", help="The approval's id.")]
ReasonOption = Annotated[
    str | None, typer.Option("--reason", help="Why; shown to the requester and audited.")
]


class _Answer(Exception):
    """A refusal from the approvals (not found, not allowed) to print as the outcome."""

    def __init__(self, outcome: Failed) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


@approvals_app.command("list")
@with_reach("key", "url", "db", "json_output")
def list_approvals(
    status: Annotated[
        str, typer.Option("--status", help=f"One of: {', '.join(_STATUSES)}.")
    ] = "pending",
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="Without --key: every approval of this tenant."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500)] = 100,
    *,
    reach: Reach,
) -> None:
    """List approvals, newest first (pending ones unless `--status` says otherwise)."""
    with unusable_input(reach.debug):
        wanted = chosen("--status", status, _STATUSES)
        if reach.url is not None:
            if tenant is not None:
                raise Unusable("--tenant reads the store directly; over --url, --key decides")
            params = {"status": status, "limit": str(limit)}
            rows = _remote(reach, "GET", "/v1/approvals", params=params)["approvals"]
        else:
            _one_of_key_or_tenant(reach.key, tenant)  # before the database is opened
            rows = _run(reach, lambda host: _local_list(host, reach.key, tenant, wanted, limit))
    if reach.json_output:
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    console().print(_table(rows, status))


@approvals_app.command("show")
@with_reach("key", "url", "db", "json_output")
def show(approval_id: ApprovalId, *, reach: Reach) -> None:
    """Show one approval with the exact arguments it is bound to."""
    with unusable_input(reach.debug):
        if reach.url is not None:
            row = _remote(reach, "GET", f"/v1/approvals/{quote(approval_id, safe='')}")
        else:
            row = _run(reach, lambda host: _local_show(host, reach.key, approval_id))
    _print_one(row, reach.json_output)


@approvals_app.command("grant")
@with_reach("key", "url", "db", "json_output")
def grant(approval_id: ApprovalId, reason: ReasonOption = None, *, reach: Reach) -> None:
    """Grant a pending approval, as the approver whose `--key` this is."""
    _decide(approval_id, "grant", reason, reach)


@approvals_app.command("deny")
@with_reach("key", "url", "db", "json_output")
def deny(approval_id: ApprovalId, reason: ReasonOption = None, *, reach: Reach) -> None:
    """Deny a pending approval (or revoke a granted one not yet used), as `--key`."""
    _decide(approval_id, "deny", reason, reach)


def _decide(approval_id: str, decision: str, reason: str | None, reach: Reach) -> None:
    key = reach.key
    with unusable_input(reach.debug):
        if key is None:
            raise Unusable(
                f"{decision} needs --key (or CHARTER_KEY): an approver's API key, "
                "with the charter:approve scope"
            )
        if reach.url is not None:
            body = json.dumps({"reason": reason}) if reason is not None else None
            path = f"/v1/approvals/{quote(approval_id, safe='')}:{decision}"
            row = _remote(reach, "POST", path, content=body)
        else:
            row = _run(reach, lambda host: _local_decide(host, key, approval_id, decision, reason))
    _print_one(row, reach.json_output)
    if not reach.json_output and row.get("status") == "approved":
        console().print(
            Text(
                f"The requester can now retry with --request-id {row.get('requestId')} "
                f"--confirm --approval {row.get('id')}",
                style="dim",
            ),
            soft_wrap=True,  # a command stays whole for copying
        )


# --- local: through host.approvals on the store ----------------------------------------------


def _run(reach: Reach, work: Callable[[Host], Awaitable[_T]]) -> _T:
    async def run() -> _T:
        from charter.cli._host import open_store
        from charter.host import Host
        from charter.registry import Registry
        from charter.store import ApiKeyAuthenticator

        async with AsyncExitStack() as stack:
            store = await stack.enter_async_context(open_store(resolve_db(reach.db), create=False))
            # Only the approvals and the authenticator are used: no tools are needed.
            host = Host(Registry(), store=store, authenticator=ApiKeyAuthenticator(store))
            return await work(host)

    try:
        return asyncio.run(run())
    except _Answer as answer:
        raise typer.Exit(render_outcome(answer.outcome)) from None


async def _principal(host: Host, key: str) -> Principal:
    from charter.auth import AuthenticationFailed
    from charter.cli._host import principal_for

    try:
        principal = await principal_for(host, key)
    except AuthenticationFailed as exc:
        raise _Answer(failed(ErrorCode.UNAUTHENTICATED, str(exc), reason="invalid_token")) from exc
    assert principal is not None
    return principal


def _one_of_key_or_tenant(key: str | None, tenant: str | None) -> None:
    """Refuse a local listing that names neither whose approvals nor which tenant's, or both.

    Raises:
        Unusable: neither or both were given.
    """
    if key is not None and tenant is not None:
        raise Unusable("give --key (what that principal may see) or --tenant, not both")
    if key is None and tenant is None:
        raise Unusable(
            "give --key (list what that principal may see) or --tenant (every approval of "
            "one tenant, read from the store)"
        )


async def _local_list(
    host: Host, key: str | None, tenant: str | None, status: ApprovalStatus | None, limit: int
) -> list[dict[str, Any]]:
    if key is not None:
        records = await host.approvals.list(await _principal(host, key), status, limit)
    else:
        assert tenant is not None  # _one_of_key_or_tenant
        records = await host.store.list_approvals(tenant, status, limit)
    return [_wire(record) for record in records]


async def _local_show(host: Host, key: str | None, approval_id: str) -> dict[str, Any]:
    store: LedgerStore = host.store
    if key is not None:
        record = await host.approvals.get(await _principal(host, key), approval_id)
    else:
        record = await store.get_approval(approval_id)
    if record is None:
        raise _Answer(_not_found(approval_id))
    return _wire(record)


async def _local_decide(
    host: Host, key: str, approval_id: str, decision: str, reason: str | None
) -> dict[str, Any]:
    approver = await _principal(host, key)
    decide = host.approvals.grant if decision == "grant" else host.approvals.deny
    result = await decide(approval_id, approver, reason)
    if isinstance(result, Failed):
        raise _Answer(result)
    return _wire(result)


def _wire(record: ApprovalRecord) -> dict[str, Any]:
    """An approval in the HTTP API's shape (camelCase, no fingerprint), for both paths."""
    data = record.model_dump(mode="json", exclude={"fingerprint"})
    return {to_camel(name): value for name, value in data.items()}


def _not_found(approval_id: str) -> Failed:
    return not_found(
        "approval",
        approval_id,
        "that you may see",
        next_step="List them with `charter approvals list` and use one of their ids.",
    )


# --- remote: the server's /v1/approvals ---------------------------------------------------------


def _remote(
    reach: Reach,
    method: str,
    path: str,
    *,
    params: dict[str, str] | None = None,
    content: str | None = None,
) -> dict[str, Any]:
    assert reach.url is not None  # asked only when --url is given
    with Remote(reach.url, reach.key) as remote:
        body = remote.ok_json(remote.request(method, path, params=params, content=content))
    if not isinstance(body, dict):
        raise typer.Exit(render_outcome(problem_outcome(200, body)))
    return body


# --- rendering --------------------------------------------------------------------------------

_STATUS_STYLE = {"pending": "yellow", "approved": "green", "denied": "red", "consumed": "dim"}


def _table(rows: list[dict[str, Any]], status: str) -> Table:
    noun = "approval" if status == "all" else f"{status} approval"
    title = f"1 {noun}" if len(rows) == 1 else f"{len(rows)} {noun}s"
    # Three wide cells rather than eight narrow columns: it reads at 80 columns.
    table = Table(title=Text(title, style="bold"), title_justify="left")
    table.add_column("approval", no_wrap=True)
    table.add_column("action", overflow="fold")
    table.add_column("arguments", overflow="fold")
    for row in rows:
        state = str(row.get("status"))
        approval = Text(str(row.get("id")))
        approval.append(f"\n{state}", style=_STATUS_STYLE.get(state, ""))
        approval.append(f", expires {_in(row.get('expiresAt'))}", style="dim")
        action = Text(str(row.get("tool")), style="bold")
        if row.get("target"):
            action.append(f" on {row.get('target')}")
        action.append(
            f"\nby {row.get('requesterId')}@{row.get('tenantId')}, risk {row.get('risk')}",
            style="dim",
        )
        table.add_row(approval, action, json.dumps(row.get("arguments"), ensure_ascii=False))
    return table


def _print_one(row: dict[str, Any], json_output: bool) -> None:
    if json_output:
        typer.echo(json.dumps(row, indent=2, ensure_ascii=False))
        return
    grid = Table.grid(padding=(0, 2))
    status = str(row.get("status"))
    grid.add_row("approval", Text(str(row.get("id")), style="bold"))
    grid.add_row("status", Text(status, style=_STATUS_STYLE.get(status, "")))
    grid.add_row(
        "tool", f"{row.get('tool')} ({row.get('capabilityId')}@{row.get('capabilityVersion')})"
    )
    grid.add_row("target", str(row.get("target") or "-"))
    grid.add_row("requester", f"{row.get('requesterId')} in tenant {row.get('tenantId')}")
    grid.add_row("request id", str(row.get("requestId")))
    grid.add_row("risk", str(row.get("risk")))
    grid.add_row("expires", f"{row.get('expiresAt')} ({_in(row.get('expiresAt'))})")
    if row.get("decidedBy"):
        decided = f"{row.get('decidedBy')} at {row.get('decidedAt')}"
        if row.get("decisionReason"):
            decided += f": {row.get('decisionReason')}"
        grid.add_row("decided", decided)
    grid.add_row("arguments", json.dumps(row.get("arguments"), indent=2, ensure_ascii=False))
    console().print(grid)


def _in(moment: object) -> str:
    """How long until an ISO timestamp, for people ("in 59m", or "expired")."""
    try:
        when = datetime.fromisoformat(str(moment))
    except ValueError:
        return str(moment)
    seconds = int((when - datetime.now(UTC)).total_seconds())
    if seconds <= 0:
        return "expired"
    if seconds < 3600:
        return f"in {max(seconds // 60, 1)}m"
    return f"in {seconds // 3600}h{seconds % 3600 // 60:02d}m"
