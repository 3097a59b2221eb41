"""`charter tools` and `charter call`: a host's tools, in this process or on a server."""

from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import AsyncExitStack
from datetime import date
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.table import Table
from rich.text import Text

from charter._redaction import redact
from charter.cli._common import (
    Reach,
    Unusable,
    console,
    error_console,
    parse_json_object,
    parse_request_id,
    unusable_input,
    with_reach,
)
from charter.cli._outcome import render_outcome
from charter.cli._remote import Remote, outcome_from_response
from charter.errors import ErrorCode
from charter.outcome import Completed, Failed, ToolOutcome, failed
from charter.policy import InvocationControls

__all__ = ("call", "tools")

TargetArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="TARGET",
        help="module:attribute naming a Host, a Registry, or a factory of one "
        "(leave it out with --url).",
        show_default=False,
    ),
]


def _target_or_url(target: str | None, url: str | None, upstreams: str | None = None) -> None:
    if (target is not None or upstreams is not None) and url is not None:
        raise Unusable("give TARGET (or --upstreams) or --url, not both")
    if target is None and url is None and upstreams is None:
        raise Unusable("give TARGET (module:attribute) or --url of a running server")


UpstreamsOption = Annotated[
    str | None,
    typer.Option(
        "--upstreams",
        help="A TOML file of upstream MCP servers: connect to them and list their tools too.",
        show_default=False,
    ),
]


# --- charter tools ----------------------------------------------------------------------------


@with_reach("url", "key", "db", "json_output")
def tools(
    target: TargetArgument = None, *, reach: Reach, upstreams: UpstreamsOption = None
) -> None:
    """List the tools: name, version, tier and risk, who may call, and policy.

    TARGET lists every registered tool; `--upstreams` adds (or, alone, lists) the tools of
    the upstream MCP servers in that file, as charter governs them; `--url` lists what the
    server shows the caller of `--key`. Deprecated tools and aliases past their sunset date
    get a warning.
    """
    with unusable_input(reach.debug):
        _target_or_url(target, reach.url, upstreams)
        if reach.url is not None:
            entries = _remote_entries(reach)
        else:
            entries = asyncio.run(_local_entries(target, upstreams, reach.db))
    from charter.manifest import deprecation_warnings

    today = date.today()
    for entry in entries:
        warnings = entry.get("warnings") or deprecation_warnings(entry, today)
        if warnings:
            entry["warnings"] = warnings
    if reach.json_output:
        typer.echo(json.dumps(entries, indent=2, ensure_ascii=False))
        return
    out = console()
    out.print(_tools_table(entries))
    for entry in entries:
        for warning in entry.get("warnings", ()):
            out.print(Text(f"warning: {warning}", style="yellow"))


async def _local_entries(
    target: str | None, upstreams: str | None, db: str | None
) -> list[dict[str, Any]]:
    from charter.cli._host import open_served  # the host's modules: not for --url

    async with AsyncExitStack() as stack:
        opened = await open_served(target, upstreams, db, stack)
        return [dict(entry) for entry in opened.host.registry.list()]


def _remote_entries(reach: Reach) -> list[dict[str, Any]]:
    assert reach.url is not None  # asked only when --url is given
    with Remote(reach.url, reach.key) as remote:
        body = remote.ok_json(remote.request("GET", "/v1/tools"))
    listed = body.get("tools") if isinstance(body, dict) else None
    if not isinstance(listed, list):
        raise Unusable(f"{reach.url}/v1/tools did not return a tool list")
    return [dict(entry) for entry in listed if isinstance(entry, dict)]


def _tools_table(entries: list[dict[str, Any]]) -> Table:
    # One fact per line inside a cell keeps the columns narrow enough for 80 columns.
    table = Table(title=Text(_count(len(entries), "tool"), style="bold"), title_justify="left")
    table.add_column("name  version", no_wrap=True)
    table.add_column("tier, risk", min_width=11)
    table.add_column("access", no_wrap=True)
    table.add_column("policy", min_width=9)
    for entry in entries:
        tier = str(entry.get("tier"))
        table.add_row(
            _name_cell(entry),
            Text(f"{tier}\n{entry.get('deploymentRisk')}", style=_TIER_STYLE.get(tier, "")),
            _access(entry),
            "\n".join(_policy_summary(entry)) or "-",
        )
    return table


def _name_cell(entry: dict[str, Any]) -> Text:
    name = Text(str(entry.get("name")), style="bold")
    name.append(f"  {entry.get('capabilityVersion') or '-'}", style="dim")
    if entry.get("deprecation"):
        name.append(" (deprecated)", style="yellow")
    deprecated = entry.get("aliasDeprecations") or {}
    for alias in entry.get("aliases") or ():
        name.append(f"\nalias {alias}", style="dim")
        if alias in deprecated:
            name.append("\n  deprecated", style="yellow")
    return name


def _access(entry: dict[str, Any]) -> str:
    """Who may call: the required scopes, or the auth mode when it is not ``identity``."""
    scopes = "\n".join(entry.get("requiredScopes") or ())
    auth = str(entry.get("auth"))
    if auth == "identity":
        return scopes or "any caller"
    return f"{auth}\n{scopes}".strip()


_TIER_STYLE = {"read": "green", "write": "cyan", "sensitive": "yellow", "destructive": "red"}


def _policy_summary(entry: dict[str, Any]) -> list[str]:
    """What a caller must send or expect: a request id, confirmation, approval, delegation."""
    required = (entry.get("controls") or {}).get("required") or ()
    policy = entry.get("actionPolicy") or {}
    parts = []
    if "requestId" in required:
        parts.append("requestId")
    if policy.get("targetLifecycle") == "created":
        parts.append(f"creates {policy.get('targetType', 'a target')}")
    if "confirmed" in required:
        parts.append("confirm")
    if policy.get("approval") == "required":
        parts.append("approval")
    elif policy.get("approval") == "conditional":
        parts.append("approval if asked")
    if entry.get("delegable"):
        parts.append("delegable")
    return parts


def _count(n: int, noun: str) -> str:
    return f"1 {noun}" if n == 1 else f"{n} {noun}s"


# --- charter call -----------------------------------------------------------------------------


@with_reach("key", trailing=("url", "db", "json_output"))
def call(
    target: TargetArgument,
    name: Annotated[
        str | None,
        typer.Argument(metavar="NAME", help="The tool's name or alias.", show_default=False),
    ] = None,
    args: Annotated[
        str,
        typer.Option("--args", "-a", help="The arguments: a JSON object, or @file.json."),
    ] = "{}",
    *,
    reach: Reach,
    request_id: Annotated[
        str | None,
        typer.Option(
            "--request-id",
            help="The call's UUID; reuse it to retry or replay. Made up when the tool needs one.",
        ),
    ] = None,
    confirm: Annotated[
        bool, typer.Option("--confirm", help="The user confirmed this call (_charter.confirmed).")
    ] = False,
    approval: Annotated[
        str | None, typer.Option("--approval", help="The granted approval id to run under.")
    ] = None,
) -> None:
    """Call a tool and print its outcome.

    `charter call TARGET NAME --args JSON` runs the call in this process through the
    host's pipeline; `charter call --url URL NAME --args JSON` sends it to a running
    server. Exit status: 0 completed, 1 failed, 3 waiting for a confirmation or an
    approval (retry with the same `--request-id`), 4 denied by a person or expired (final
    for that request id).
    """
    with unusable_input(reach.debug):
        if reach.url is not None and name is None:
            target, name = None, target
        if name is None:
            raise Unusable("give the tool's NAME after TARGET (or use --url URL NAME)")
        _target_or_url(target, reach.url)
        raw, _ = parse_json_object(args, "--args")
        controls = _Controls(parse_request_id(request_id), confirm, approval)
        if reach.url is not None:
            outcome = _call_remote(reach, name, raw, controls)
        else:
            assert target is not None
            outcome = asyncio.run(_call_local(target, reach, name, raw, controls))
            if isinstance(outcome, Failed):
                # What a server would answer: a failure it caused shows its error id only
                # (the text is in this process's log); a remote answer already is.
                outcome = redact(outcome)
    if controls.made_up and not isinstance(outcome, Completed):
        error_console().print(
            Text(f"request id {controls.request_id} (reuse it with --request-id)", style="dim")
        )
    where = ""  # what the next steps' commands add to reach the same server or store
    if reach.url is not None:
        where = f" --url {reach.url}"
    elif reach.db is not None:
        where = f" --db {reach.db}"
    raise typer.Exit(
        render_outcome(outcome, controls.request_id, json_output=reach.json_output, where=where)
    )


class _Controls:
    """The controls given as options; a request id is made up when the tool requires one."""

    def __init__(self, request_id: str | None, confirm: bool, approval: str | None) -> None:
        self.request_id = request_id
        self.made_up = False
        self.confirm = confirm
        self.approval = approval

    def require_request_id(self, entry: dict[str, Any] | None) -> None:
        required = ((entry or {}).get("controls") or {}).get("required") or ()
        if self.request_id is None and "requestId" in required:
            self.request_id = str(uuid.uuid4())
            self.made_up = True

    def invocation_controls(self) -> InvocationControls | None:
        given: dict[str, object] = {}
        if self.request_id is not None:
            given["request_id"] = self.request_id
        if self.confirm:
            given["confirmed"] = True
        if self.approval is not None:
            given["approval_id"] = self.approval
        return InvocationControls.model_validate(given) if given else None

    def headers(self) -> dict[str, str]:
        headers = {}
        if self.request_id is not None:
            headers["Idempotency-Key"] = self.request_id
        if self.confirm:
            headers["Charter-Confirm"] = "true"
        if self.approval is not None:
            headers["Charter-Approval"] = self.approval
        return headers


async def _call_local(
    target: str, reach: Reach, name: str, raw: str, controls: _Controls
) -> ToolOutcome:
    from charter.auth import AuthenticationFailed
    from charter.cli._host import open_host, principal_for

    async with AsyncExitStack() as stack:
        opened = await open_host(target, reach.db, stack)
        try:
            principal = await principal_for(opened.host, reach.key)
        except AuthenticationFailed as exc:
            return failed(ErrorCode.UNAUTHENTICATED, str(exc), reason="invalid_token")
        registered = opened.host.registry.get(name)
        controls.require_request_id(registered.entry if registered is not None else None)
        # The raw JSON text, so the host applies its payload limits exactly as a server would.
        return await opened.host.invoke(name, raw, principal, controls.invocation_controls())


def _call_remote(reach: Reach, name: str, raw: str, controls: _Controls) -> ToolOutcome:
    assert reach.url is not None  # asked only when --url is given
    path = f"/v1/tools/{quote(name, safe='')}"
    with Remote(reach.url, reach.key) as remote:
        if controls.request_id is None:
            found = remote.request("GET", path)
            if found.status_code == 200:
                controls.require_request_id(remote.json(found))
        response = remote.request("POST", f"{path}:call", content=raw, headers=controls.headers())
        return outcome_from_response(remote, response)
