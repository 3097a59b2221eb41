r"""Limits on untrusted JSON payloads, enforced before any validation.

Everything a caller sends passes through `parse_json` (raw bytes or text) or `check_value`
(a value a transport library already parsed) first, so hostile input ends as a
`PayloadRejected` with a reason, never as a `RecursionError`, a `MemoryError` or a 500.
Nothing here recurses. Error messages name the limit and never echo the payload.

NUL characters (``"a\u0000b"``) are valid JSON and pass this layer; stores that cannot hold
them reject them later.

Modules: ``_payload_limits`` (the bounds), ``_rejection`` (the reasons and the exception),
``_parse`` (text: size, depth, then the strict decoders of ``_decoders``), ``_values``
(a parsed value, walked without recursion).
"""

from __future__ import annotations

from ._decoders import check_unique_keys as check_unique_keys
from ._parse import parse_json as parse_json
from ._payload_limits import PayloadLimits as PayloadLimits
from ._rejection import PayloadRejected as PayloadRejected
from ._rejection import RejectionReason as RejectionReason
from ._values import check_value as check_value

__all__ = (
    "PayloadLimits",
    "PayloadRejected",
    "RejectionReason",
    "check_unique_keys",
    "check_value",
    "parse_json",
)
