"""A REST body is JSON, and says so: any other ``Content-Type`` is 415.

A browser sends a cross-site POST without asking the server first (no CORS preflight)
only when its body is ``text/plain``, a form or multipart, so a route that takes nothing
but a declared JSON body never receives a request forged that way, whatever its
``Origin`` check allows. Only the head is read: the route calls ``unsupported_body``
just before it would read the body, once the caller is known.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import Scope

from charter._asgi import content_length
from charter.errors import ErrorCode

from ._problem import http_problem, status_for

__all__ = ("is_json_media_type", "unsupported_body")

_REASON = "unsupported_media_type"


def is_json_media_type(value: bytes) -> bool:
    """Whether a ``Content-Type`` value is JSON: ``application/json`` or ``application/*+json``.

    Parameters (``; charset=utf-8``) and case do not matter.
    """
    media_type = value.split(b";", 1)[0].strip().lower()
    return media_type == b"application/json" or (
        media_type.startswith(b"application/") and media_type.endswith(b"+json")
    )


def unsupported_body(scope: Scope) -> Response | None:
    """The 415 for a request whose body is not declared JSON; None when it is, or is empty.

    A ``Content-Type`` that is not JSON (``text/plain``, a form), or more than one, is
    refused even with an empty body; a body without a ``Content-Type`` (a
    ``Content-Length`` above 0, or a chunked body) is refused too.
    """
    sent: list[bytes] = []
    chunked = False
    for name, value in scope["headers"]:
        if name == b"content-type":
            sent.append(value)
        elif name == b"transfer-encoding":
            chunked = True
    if len(sent) == 1:
        if is_json_media_type(sent[0]):
            return None
        shown = sent[0].decode("latin-1")[:100]
        return _unsupported(f"The body must be JSON, and this request's is {shown!r}.")
    if sent:
        return _unsupported("The request has more than one Content-Type header.")
    declared = content_length(scope["headers"])
    if not chunked and (declared is None or declared == 0):
        return None
    return _unsupported("The request has a body but no Content-Type.")


def _unsupported(detail: str) -> Response:
    status, title = status_for(ErrorCode.INVALID_INPUT, _REASON)
    return http_problem(
        status,
        title,
        f"{detail} Send it with 'Content-Type: application/json'.",
        code=ErrorCode.INVALID_INPUT,
        reason=_REASON,
        meta={"accepted": "application/json"},
        next_steps=(
            "Send the body as JSON with 'Content-Type: application/json', or send no body.",
        ),
    )
