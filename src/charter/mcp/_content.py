"""Resources, resource templates, prompts and completions over MCP: ``host.content`` rendered.

Every decision (who may list, read, get, complete) is the host's (``Host.content``); this
module only maps it onto the SDK's types. A refusal is a JSON-RPC error, since these
methods have no ``isError`` result: ``-32002`` for an unknown or hidden resource,
``-32602`` for an unknown prompt or invalid arguments, ``-32600`` for a missing scope or
credentials, ``-32603`` when the handler failed; ``data`` carries the ``Failed`` outcome
(``charter/outcome``) with the code, reason and, for scopes, what is missing.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError

from ..auth import Principal
from ..errors import ErrorCode
from ..host import Host
from ..outcome import Failed
from ..resources import (
    BlobContents,
    Prompt,
    PromptAudio,
    PromptContent,
    PromptImage,
    PromptResource,
    PromptText,
    Resource,
    ResourceContents,
    TextContents,
)
from ._listing import refuse_cursor
from ._reauth import Caller, Standing, caller_of
from ._render import OUTCOME_META_KEY

__all__ = ("NO_SESSION", "RESOURCE_NOT_FOUND", "ContentHandlers", "content_error")

NO_SESSION = "\x00no-session"
"""A stateless HTTP request: it belongs to no session that could remember anything."""

RESOURCE_NOT_FOUND = -32002
"""The JSON-RPC error code the MCP specification gives an unknown resource."""

_MAX_SUBSCRIBERS = 10_000
"""Sessions whose subscriptions are remembered; the oldest are forgotten past it."""

Context = ServerRequestContext[Any, Any]


@dataclass(kw_only=True, slots=True)
class _Subscriber:
    """One session's subscriptions: who subscribed (and with what), and how to reach them."""

    caller: Caller
    session: ServerSession
    uris: set[str] = field(default_factory=set)


class ContentHandlers:
    """The SDK handlers for resources, prompts and completions of one server."""

    def __init__(
        self,
        host: Host,
        *,
        principal_of: Callable[[Context], Principal | None],
        session_of: Callable[[Context], str | None],
    ) -> None:
        """Serve ``host.content``; ``principal_of`` names the caller of a request."""
        self.host = host
        self.principal_of = principal_of
        self.session_of = session_of
        self._subscribers: OrderedDict[str | None, _Subscriber] = OrderedDict()
        self.unwatch = host.content.watch(self.updated)

    # -- resources ----------------------------------------------------------------------------

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """``resources/list``: the fixed resources this caller may read."""
        refuse_cursor(params)
        found = self.host.content.resources(self.principal_of(ctx))
        return types.ListResourcesResult(resources=[_resource(r) for r in found])

    async def list_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        """``resources/templates/list``: the resource templates this caller may read."""
        refuse_cursor(params)
        found = self.host.content.templates(self.principal_of(ctx))
        return types.ListResourceTemplatesResult(resource_templates=[_template(r) for r in found])

    async def read_resource(
        self, ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """``resources/read``: the host reads it as this caller."""
        read = await self.host.content.read(params.uri, self.principal_of(ctx))
        if isinstance(read, Failed):
            raise content_error(read, resource=True)
        return types.ReadResourceResult(contents=[_contents(c) for c in read.contents])

    async def subscribe(
        self, ctx: Context, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """``resources/subscribe``: remember it, if this caller may read the resource."""
        principal = self.principal_of(ctx)
        refusal = self.host.content.check_read(params.uri, principal)
        if refusal is not None:
            raise content_error(refusal, resource=True)
        key = self.session_of(ctx)
        if key == NO_SESSION:
            raise MCPError(
                code=types.INVALID_REQUEST,
                message="Subscriptions need a session: connect over stateful streamable HTTP "
                "or stdio, or read the resource again when you need it.",
            )
        caller = caller_of(ctx, principal)
        subscriber = self._subscribers.get(key)
        if subscriber is None:
            subscriber = _Subscriber(caller=caller, session=ctx.session)
            self._subscribers[key] = subscriber
        # The newest request's caller, credential and handle on the connection (stdio and
        # in-memory connections share one key per server, so the newest connection wins
        # there).
        subscriber.caller = caller
        subscriber.session = ctx.session
        self._subscribers.move_to_end(key)
        subscriber.uris.add(params.uri)
        while len(self._subscribers) > _MAX_SUBSCRIBERS:
            self._subscribers.popitem(last=False)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Context, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        """``resources/unsubscribe``: forget it (unsubscribing twice is fine)."""
        subscriber = self._subscribers.get(self.session_of(ctx))
        if subscriber is not None:
            subscriber.uris.discard(params.uri)
        return types.EmptyResult()

    async def updated(self, uri: str, tenant_id: str | None) -> None:
        """Tell each session subscribed to ``uri`` (of ``tenant_id``) that may still read it.

        Its credential is checked again first (``_reauth``): a caller whose credential no
        longer authenticates it loses every subscription of its session.
        """
        for key, subscriber in list(self._subscribers.items()):
            if uri in subscriber.uris:
                await self._tell(key, subscriber, uri, tenant_id)

    async def _tell(
        self, key: str | None, subscriber: _Subscriber, uri: str, tenant_id: str | None
    ) -> None:
        caller = subscriber.caller
        standing = await caller.standing(self.host)
        if standing is Standing.REVOKED:
            # Unless the session subscribed again meanwhile, with another credential.
            if self._subscribers.get(key) is subscriber and subscriber.caller is caller:
                del self._subscribers[key]
            return
        if standing is Standing.UNCHECKED or uri not in subscriber.uris:
            return
        content = self.host.content
        if content.check_read(uri, caller.principal) is not None:
            subscriber.uris.discard(uri)
            return
        reads_for = content.reader_tenant(uri, caller.principal)
        if tenant_id is not None and reads_for != tenant_id:
            return  # the same URI names another tenant's resource for this caller
        try:
            await subscriber.session.send_resource_updated(uri)
        except Exception:
            # The session is gone (closed stream, ended session): forget it.
            self._subscribers.pop(key, None)

    # -- prompts ------------------------------------------------------------------------------

    async def list_prompts(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        """``prompts/list``: the prompts this caller may get."""
        refuse_cursor(params)
        found = self.host.content.prompts(self.principal_of(ctx))
        return types.ListPromptsResult(prompts=[_prompt(p) for p in found])

    async def get_prompt(
        self, ctx: Context, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        """``prompts/get``: the host gets it as this caller."""
        got = await self.host.content.get_prompt(
            params.name, params.arguments, self.principal_of(ctx)
        )
        if isinstance(got, Failed):
            raise content_error(got, resource=False)
        return types.GetPromptResult(
            description=got.description,
            messages=[
                types.PromptMessage(role=m.role, content=_prompt_content(m.content))
                for m in got.messages
            ],
        )

    # -- completions -------------------------------------------------------------------------

    async def complete(
        self, ctx: Context, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        """``completion/complete``: suggestions for a prompt or template argument."""
        ref = params.ref
        kind: Literal["prompt", "resource"]
        if isinstance(ref, types.PromptReference):
            kind, key = "prompt", ref.name
        else:
            kind, key = "resource", ref.uri
        values = await self.host.content.complete(
            kind, key, params.argument.name, params.argument.value, self.principal_of(ctx)
        )
        if isinstance(values, Failed):
            raise content_error(values, resource=False)
        return types.CompleteResult(
            completion=types.Completion(values=values, total=len(values), has_more=False)
        )


def _resource(resource: Resource) -> types.Resource:
    return types.Resource(uri=resource.uri, **resource.described())


def _template(resource: Resource) -> types.ResourceTemplate:
    return types.ResourceTemplate(uri_template=resource.uri, **resource.described())


def _prompt(prompt: Prompt) -> types.Prompt:
    return types.Prompt(
        name=prompt.name,
        title=prompt.title,
        description=prompt.description,
        arguments=[
            types.PromptArgument(name=a.name, description=a.description, required=a.required)
            for a in prompt.arguments
        ],
    )


def _contents(
    contents: ResourceContents,
) -> types.TextResourceContents | types.BlobResourceContents:
    if isinstance(contents, TextContents):
        return types.TextResourceContents(
            uri=contents.uri, mime_type=contents.mime_type, text=contents.text
        )
    return types.BlobResourceContents(
        uri=contents.uri, mime_type=contents.mime_type, blob=_b64(contents)
    )


def _b64(contents: BlobContents | PromptImage | PromptAudio) -> str:
    data = contents.blob if isinstance(contents, BlobContents) else contents.data
    return base64.b64encode(data).decode("ascii")


def _prompt_content(
    content: PromptContent,
) -> types.TextContent | types.ImageContent | types.AudioContent | types.EmbeddedResource:
    if isinstance(content, PromptText):
        return types.TextContent(type="text", text=content.text)
    if isinstance(content, PromptImage):
        return types.ImageContent(type="image", data=_b64(content), mime_type=content.mime_type)
    if isinstance(content, PromptAudio):
        return types.AudioContent(type="audio", data=_b64(content), mime_type=content.mime_type)
    assert isinstance(content, PromptResource)
    return types.EmbeddedResource(type="resource", resource=_contents(content.resource))


_INVALID = {ErrorCode.INVALID_INPUT, ErrorCode.NOT_FOUND}
_REFUSED = {ErrorCode.AUTHORIZATION_DENIED, ErrorCode.UNAUTHENTICATED}


def content_error(outcome: Failed, *, resource: bool) -> MCPError:
    """The JSON-RPC error for a refused read, get or completion."""
    if resource and outcome.code == ErrorCode.NOT_FOUND:
        code = RESOURCE_NOT_FOUND
    elif outcome.code in _INVALID:
        code = types.INVALID_PARAMS
    elif outcome.code in _REFUSED:
        code = types.INVALID_REQUEST
    else:
        code = types.INTERNAL_ERROR
    return MCPError(
        code=code,
        message=f"[{outcome.code.value}] {outcome.message}",
        data={OUTCOME_META_KEY: outcome.model_dump(mode="json")},
    )
