"""``/v1/resources`` and ``/v1/prompts``: ``Host.content`` over REST, as MCP serves it."""

from __future__ import annotations

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from charter.host import Host
from charter.outcome import Failed

from ._authentication import caller_of
from ._media_type import unsupported_body
from ._payloads_content import PromptListBody, PromptResultBody, ResourceListBody, ResourceReadBody
from ._problem import failed_problem
from ._responses import json_response

__all__ = ("ContentRoutes",)


class ContentRoutes:
    """The endpoints under ``/v1/resources`` and ``/v1/prompts`` for one host."""

    def __init__(self, host: Host) -> None:
        """Serve ``host.content``."""
        self.host = host

    async def list_resources(self, request: Request) -> Response:
        """``GET /v1/resources``: the resources and templates the caller may read."""
        caller = caller_of(request)
        content = self.host.content
        body = ResourceListBody.of(content.resources(caller), content.templates(caller))
        return json_response(body)

    async def read_resource(self, request: Request) -> Response:
        """``GET /v1/resources/{uri}``: read one (the URI percent-encoded, or as is)."""
        uri: str = request.path_params["uri"]
        read = await self.host.content.read(uri, caller_of(request))
        if isinstance(read, Failed):
            return failed_problem(read)
        return _sparse(ResourceReadBody.of(read))

    async def list_prompts(self, request: Request) -> Response:
        """``GET /v1/prompts``: the prompts the caller may get."""
        return json_response(PromptListBody.of(self.host.content.prompts(caller_of(request))))

    async def get_prompt(self, request: Request) -> Response:
        """``POST /v1/prompts/{name}:get``: the body is the arguments, an object of strings."""
        caller = caller_of(request)
        name: str = request.path_params["name"]
        unsupported = unsupported_body(request.scope)
        if unsupported is not None:
            return unsupported
        # The host reads the body as it reads a tool call's (limits, keys, strings only).
        got = await self.host.content.get_prompt(name, await request.body(), caller)
        if isinstance(got, Failed):
            return failed_problem(got)
        return _sparse(PromptResultBody.of(got))


def _sparse(body: BaseModel) -> Response:
    """A payload without its unset optional members (a text part has no ``blob``)."""
    return Response(
        body.model_dump_json(by_alias=True, exclude_none=True), media_type="application/json"
    )
