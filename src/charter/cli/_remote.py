"""Talking to a running charter server for `--url`: requests, and answers as outcomes.

The HTTP transport renders each outcome as a status and a body (DESIGN §5); this module
reads them back into the same `ToolOutcome` values a local `Host.invoke` returns, so a
command renders both paths with one function.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import typer
from pydantic import ValidationError

from charter.cli._common import Unusable, display_url
from charter.cli._outcome import render_outcome
from charter.errors import ErrorCode
from charter.outcome import Completed, Deferred, Denied, Failed, InteractionRequired, ToolOutcome

if TYPE_CHECKING:
    import httpx

__all__ = ("Remote", "outcome_from_response", "problem_outcome")

_TIMEOUT_SECONDS = 30.0
_READ_TIMEOUT_SECONDS = 300.0
"""A tool call may run for minutes; connecting and writing should not."""


class Remote:
    """A charter server at ``url``, called with an optional API key (as a bearer token)."""

    def __init__(self, url: str, key: str | None) -> None:
        """Prepare a client; nothing connects until the first request.

        Raises:
            Unusable: ``url`` is not an http(s) URL, or httpx is not installed.
        """
        if not url.startswith(("http://", "https://")):
            raise Unusable(f"--url must be an http:// or https:// URL, not {url!r}")
        try:
            import httpx
        except ImportError as exc:
            raise Unusable("--url needs httpx: pip install 'charter[http]'") from exc
        self.url = url.rstrip("/")
        self.shown = display_url(self.url)
        """The URL as messages show it: its password, if it has one, masked."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(_TIMEOUT_SECONDS, read=_READ_TIMEOUT_SECONDS),
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        content: str | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Send one request; an unreachable server is ``Unusable``.

        Raises:
            Unusable: The server cannot be reached or did not answer.
        """
        import httpx

        sent = dict(headers or {})
        if content is not None:
            sent.setdefault("Content-Type", "application/json")
        try:
            return self._client.request(method, path, content=content, headers=sent, params=params)
        except httpx.TransportError as exc:
            raise Unusable(f"cannot reach {self.shown}: {exc or type(exc).__name__}") from exc

    def json(self, response: httpx.Response) -> Any:
        """The response's JSON body.

        Raises:
            Unusable: The body is not JSON (the URL is probably not a charter server).
        """
        try:
            return response.json()
        except ValueError:
            kind = response.headers.get("content-type", "no content type")
            raise Unusable(
                f"{self.shown} answered {response.status_code} with {kind}, not JSON; "
                "is it a charter server?"
            ) from None

    def ok_json(self, response: httpx.Response) -> Any:
        """The JSON body of a 200 answer.

        Raises:
            typer.Exit: The server answered another status; its problem is printed.
            Unusable: The body is not JSON.
        """
        body = self.json(response)
        if response.status_code != 200:
            raise typer.Exit(render_outcome(problem_outcome(response.status_code, body)))
        return body


def outcome_from_response(remote: Remote, response: httpx.Response) -> ToolOutcome:
    """Read ``POST /v1/tools/{name}:call``'s answer back into an outcome.

    Raises:
        Unusable: The answer is not one a charter server gives.
    """
    body = remote.json(response)
    try:
        if response.status_code == 200:
            return Completed(output=body["output"], replayed=bool(body.get("replayed")))
        if response.status_code == 202 and body.get("kind") == "deferred":
            return Deferred(token=body.get("token"))
        if response.status_code == 202:
            # The nested interaction and continuation are validated from their JSON too.
            return InteractionRequired.model_validate(
                {
                    "interaction": body["interaction"],
                    "token": body.get("token"),
                    "gate": body.get("gate") or "handler",
                    "request_id": body.get("requestId"),
                    "approval_id": body.get("approvalId"),
                    "approval_status": body.get("approvalStatus"),
                    "expires_at": body.get("expiresAt"),
                    "continuation": body.get("retryWith") or None,
                    "next_steps": tuple(body.get("nextSteps") or ()),
                }
            )
    except (KeyError, TypeError, ValidationError) as exc:
        raise Unusable(
            f"{remote.url} answered {response.status_code} with an unexpected body"
        ) from exc
    return problem_outcome(response.status_code, body)


def problem_outcome(status: int, body: object) -> Failed | Denied:
    """An RFC 9457 problem from a charter server as the outcome it renders."""
    problem: dict[str, Any] = body if isinstance(body, dict) else {}
    detail = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
    if problem.get("type") == "urn:charter:denied":
        facts = problem.get("meta")
        facts = facts if isinstance(facts, dict) else {}
        denial_steps = problem.get("next_steps")
        return Denied.model_validate(
            {
                "reason": detail,
                "cause": facts.get("cause"),
                "approval_id": facts.get("approvalId"),
                "request_id": facts.get("requestId"),
                "decided_by": facts.get("decidedBy"),
                "decided_at": facts.get("decidedAt"),
                "decision_reason": facts.get("decisionReason"),
                "next_steps": denial_steps if isinstance(denial_steps, list) else (),
            }
        )
    try:
        code = ErrorCode(str(problem.get("code")))
    except ValueError:
        code = ErrorCode.NOT_FOUND if status == 404 else ErrorCode.PROVIDER_ERROR
    meta: dict[str, Any] = dict(problem.get("meta") or {})
    for name in ("reason", "error_id"):
        if problem.get(name) is not None:
            meta[name if name == "reason" else "errorId"] = problem[name]
    steps = problem.get("next_steps")
    return Failed(
        code=code,
        message=detail,
        retryable=bool(problem.get("retryable")),
        next_steps=tuple(str(s) for s in steps) if isinstance(steps, list) else (),
        meta=meta or None,
        replayed=bool(problem.get("replayed")),
    )
