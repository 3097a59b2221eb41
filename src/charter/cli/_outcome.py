"""How a command prints a tool outcome, and the exit status each outcome maps to."""

from __future__ import annotations

import json

import typer
from rich.text import Text

from charter.cli._common import (
    EXIT_CHECK_FAILED,
    EXIT_DENIED,
    EXIT_OK,
    EXIT_PENDING,
    console,
    error_console,
)
from charter.outcome import Completed, Deferred, Denied, Failed, InteractionRequired, ToolOutcome

__all__ = ("render_outcome",)


def render_outcome(
    outcome: ToolOutcome,
    request_id: str | None = None,
    *,
    json_output: bool = False,
    where: str = "",
) -> int:
    """Print an outcome and return the exit status for it.

    A completed call prints its output as JSON on stdout (a replay notes it on stderr);
    anything else prints what happened and what to do next. ``where`` is how the
    commands it suggests reach the same host (`` --url URL`` or `` --db URL``).
    """
    if json_output:
        typer.echo(outcome.model_dump_json(indent=2))
    elif isinstance(outcome, Completed):
        typer.echo(json.dumps(outcome.output, indent=2, ensure_ascii=False))
        if outcome.replayed:
            error_console().print(
                Text(
                    "replayed: the stored outcome of an earlier call with this request id "
                    "(the tool did not run again)",
                    style="dim",
                )
            )
    else:
        _print_not_completed(outcome, request_id, where)
    if isinstance(outcome, Completed):
        return EXIT_OK
    if isinstance(outcome, InteractionRequired | Deferred):
        return EXIT_PENDING
    if isinstance(outcome, Denied):
        return EXIT_DENIED
    return EXIT_CHECK_FAILED


def _print_not_completed(outcome: ToolOutcome, request_id: str | None, where: str) -> None:
    out = console()
    if isinstance(outcome, Failed):
        out.print(Text(f"[{outcome.code.value}] {outcome.message}", style="bold red"))
        issues = (outcome.meta or {}).get("issues")
        for issue in issues if isinstance(issues, list) else []:
            if isinstance(issue, dict):
                loc = issue.get("loc")
                where_ = ".".join(str(p) for p in loc) if isinstance(loc, list) else ""
                out.print(Text(f"  {where_ or '(arguments)'}: {issue.get('msg')}", style="red"))
        steps: list[str] = list(outcome.next_steps)
    elif isinstance(outcome, Denied):
        out.print(Text(f"denied: {outcome.reason}", style="bold red"))
        steps = list(outcome.next_steps)
    elif isinstance(outcome, InteractionRequired):
        out.print(Text(outcome.interaction.prompt, style="bold yellow"))
        steps = _retry_steps(outcome, request_id, where)
    else:
        out.print(Text("deferred: the work continues elsewhere", style="bold yellow"))
        steps = [f"Check it with GET /v1/actions/{request_id}"] if request_id else []
    for step in steps:
        out.print(Text(f"  - {step}"), soft_wrap=True)  # commands stay whole for copying


def _retry_steps(outcome: InteractionRequired, request_id: str | None, where: str) -> list[str]:
    rid = outcome.request_id or request_id
    again = f"--request-id {rid} " if rid else ""
    if outcome.gate == "confirmation":
        return [f"Once the user agrees, run the same command with {again}--confirm"]
    if outcome.gate == "approval":
        approval_id = outcome.approval_id
        steps = [f"Then run the same command with {again}--confirm --approval {approval_id}"]
        if outcome.approval_status == "pending":
            steps.insert(
                0,
                f"Ask an approver to grant {approval_id}: charter approvals grant "
                f"{approval_id}{where} --key <approver key> (or in the console)",
            )
        return steps
    return [f"Retry the same command with {again}".rstrip()] if rid else []
