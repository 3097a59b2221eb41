"""What of a failure a caller may read: the one rule every transport renders through.

Two codes mean that the server itself failed, not the call: ``PROVIDER_ERROR`` (a handler,
resolver, presenter or store raised, or a handler raised ``ToolError(PROVIDER_ERROR, …)``)
and ``INVALID_OUTPUT`` (the output broke the tool's schema). Their text is for the
operator: a caller (REST, MCP, the CLI) reads the code, a fixed sentence, the code's
default next steps and an error id, never the message, next steps or meta the failure was
raised with. The original message goes to the ``charter`` log under that id. Every other
code is an answer the tool's author chose for the caller, and keeps its message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from ._wording import new_error_id
from .errors import DEFAULT_NEXT_STEPS, ErrorCode
from .outcome import Failed

__all__ = ("SERVER_FAULT_CODES", "new_error_id", "redact")

logger = logging.getLogger("charter")

SERVER_FAULT_CODES = frozenset({ErrorCode.PROVIDER_ERROR, ErrorCode.INVALID_OUTPUT})
"""The codes whose message never reaches a caller."""

_ERROR_ID = re.compile(r"err_[0-9a-f]{16}")

_TEXT: Mapping[ErrorCode, str] = {
    ErrorCode.PROVIDER_ERROR: "The tool failed inside the server. Error id: {error_id}.",
    ErrorCode.INVALID_OUTPUT: (
        "The tool produced output that does not match its output schema. Error id: {error_id}."
    ),
}


def redact(failed: Failed) -> Failed:
    """The failure as a caller may see it: unchanged, or reduced to its code and error id.

    A failure that already names an error id (charter logged it under that id when it
    caught the exception) keeps the id; any other is logged here, its message as a value,
    under a new one. Redacting a redacted failure changes nothing.

    Args:
        failed: the outcome the host returned.

    Returns:
        ``failed`` itself unless its code is in ``SERVER_FAULT_CODES``.
    """
    if failed.code not in SERVER_FAULT_CODES:
        return failed
    error_id = (failed.meta or {}).get("errorId")
    if not (isinstance(error_id, str) and _ERROR_ID.fullmatch(error_id)):
        error_id = new_error_id()
        logger.error(
            "a %s failure's text was withheld from the caller (error id %s): %r",
            failed.code.value,
            error_id,
            failed.message,
        )
    return Failed(
        code=failed.code,
        message=_TEXT[failed.code].format(error_id=error_id),
        retryable=failed.retryable,
        next_steps=DEFAULT_NEXT_STEPS[failed.code],
        meta={"errorId": error_id},
        replayed=failed.replayed,
    )
