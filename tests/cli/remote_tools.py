"""A tool `charter serve` tests stop mid-call: a write that waits on a remote service.

``remote.send`` is declared ``cancellable=False``: its caller, and a server stopping,
must not cut it off. Each run appends ``start <text>`` and ``end <text>`` to the file
``$MARKS`` names, so a test sees whether it ran, and ran to its end.
"""

import os
import time

from pydantic import BaseModel

from charter import Registry, RiskPolicy, tool


class Message(BaseModel):
    text: str
    seconds: float


def _mark(line: str) -> None:
    with open(os.environ["MARKS"], "a", encoding="utf-8") as marks:
        marks.write(line + "\n")


@tool(
    tier="write",
    name="remote.send",
    required_scopes=["remote:send"],
    risk_policy=RiskPolicy(
        destructive=False,
        reversible=False,
        dry_run_supported=False,
        confirmation_required=False,
        side_effects=("email",),
    ),
    cancellable=False,
)
def send(args: Message) -> Message:
    """Send a message; the remote service takes ``seconds`` to answer."""
    _mark(f"start {args.text}")
    time.sleep(args.seconds)
    _mark(f"end {args.text}")
    return args


registry = Registry()
registry.register(send)
