"""JSON responses: Pydantic payloads by alias, plain data as compact JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from starlette.responses import Response

__all__ = ("json_response",)


def json_response(
    data: BaseModel | Mapping[str, Any],
    *,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """Serialise ``data`` (a payload model by alias, or JSON-compatible data)."""
    if isinstance(data, BaseModel):
        content = data.model_dump_json(by_alias=True)
    else:
        content = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Response(
        content,
        status_code=status_code,
        media_type="application/json",
        headers=dict(headers) if headers else None,
    )
