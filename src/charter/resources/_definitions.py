"""Resources, resource templates and prompts: declared once, with the same authority as tools.

A declaration carries what the host needs to decide who may see and use it (required
scopes, audience, auth mode, tenancy) and a handler that returns plain typed data. The
host decides; every transport renders (see ``docs/contract.md``).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, TypeAdapter

from ..auth import AuthMode, validate_required_scope
from ..context import ToolContext
from ..errors import ConfigurationError
from ..tool._signature import is_async_callable, type_hints
from ._contents import (
    BlobContents,
    PromptMessage,
    PromptText,
    ResourceContents,
    TextContents,
)
from ._template import UriTemplate

__all__ = (
    "Access",
    "Completer",
    "Prompt",
    "PromptArgument",
    "Resource",
    "complete_values",
    "prompt",
    "resource",
)

Completer: TypeAlias = Callable[[str, ToolContext], Sequence[str] | Awaitable[Sequence[str]]]
"""Suggests values for one argument: ``(what the user typed so far, ctx) -> values``."""

_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_AUTH_MODES = ("identity", "admin", "public")
_MAX_COMPLETIONS = 100
"""MCP caps one completion answer at 100 values."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Access:
    """Who may see and use a resource or prompt; the host applies it as for tools."""

    required_scopes: tuple[str, ...] = ()
    audience: tuple[str, ...] | None = None
    auth: AuthMode = "identity"


@dataclass(frozen=True, kw_only=True, slots=True)
class _Call:
    """How to call a handler: with its params model, with the context, sync or async."""

    handler: Callable[..., Any]
    params_model: type[BaseModel] | None
    takes_context: bool
    is_async: bool

    async def __call__(self, params: BaseModel | None, ctx: ToolContext) -> object:
        args: list[object] = []
        if self.params_model is not None:
            args.append(params)
        if self.takes_context:
            args.append(ctx)
        if self.is_async:
            return await self.handler(*args)
        result = await asyncio.to_thread(self.handler, *args)
        return await result if inspect.isawaitable(result) else result


@dataclass(frozen=True, kw_only=True, slots=True)
class Resource:
    """A resource (fixed ``uri``) or resource template (``uri`` with ``{variables}``)."""

    uri: str
    """The URI, or the URI template (``trip://{trip_id}``)."""
    name: str
    title: str | None
    description: str
    mime_type: str
    access: Access
    delegable: bool = False
    """Whether an admin may read another tenant's (through ``tenant_param``)."""
    tenant_param: str | None = None
    """The template variable naming the tenant, if any; the caller's tenant by default."""
    complete: Mapping[str, Completer] = field(default_factory=dict)
    template: UriTemplate | None = field(default=None, repr=False)
    call: _Call = field(repr=False)

    @property
    def is_template(self) -> bool:
        """Whether this is a template (its URI has variables)."""
        return self.template is not None

    def match(self, uri: str) -> dict[str, str] | None:
        """The template variables of ``uri`` (``{}`` for a fixed resource), or None."""
        if self.template is None:
            return {} if uri == self.uri else None
        return self.template.match(uri)

    def described(self) -> dict[str, Any]:
        """What a listing (MCP, REST) says of it besides its URI, by snake_case field name."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mime_type": self.mime_type,
        }

    def params(self, values: Mapping[str, str]) -> BaseModel | None:
        """The validated params model; raises ``pydantic.ValidationError``."""
        model = self.call.params_model
        return None if model is None else model.model_validate(dict(values))

    async def read(
        self, uri: str, params: BaseModel | None, ctx: ToolContext
    ) -> list[ResourceContents]:
        """Run the handler and turn what it returned into contents."""
        return _contents(uri, self.mime_type, await self.call(params, ctx))


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptArgument:
    """One argument of a prompt (a string, as MCP defines them)."""

    name: str
    description: str | None
    required: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Prompt:
    """A prompt: messages for a model, built from string arguments."""

    name: str
    title: str | None
    description: str
    arguments: tuple[PromptArgument, ...]
    access: Access
    complete: Mapping[str, Completer] = field(default_factory=dict)
    call: _Call = field(repr=False)

    def params(self, values: Mapping[str, str]) -> BaseModel | None:
        """The validated arguments model; raises ``pydantic.ValidationError``.

        Closed like a tool's input: an argument the prompt does not declare is refused
        (``extra_forbidden``), whatever the model's own ``extra`` setting, so a misspelt
        optional argument is not silently dropped.
        """
        model = self.call.params_model
        if model is None:
            _NoArguments.model_validate(dict(values))
            return None
        return model.model_validate(dict(values), extra="forbid")

    async def messages(self, params: BaseModel | None, ctx: ToolContext) -> list[PromptMessage]:
        """Run the handler and turn what it returned into messages."""
        result = await self.call(params, ctx)
        if isinstance(result, str):
            return [PromptMessage(role="user", content=PromptText(text=result))]
        if isinstance(result, PromptMessage):
            return [result]
        return _MESSAGES.validate_python(result)


_MESSAGES = TypeAdapter(list[PromptMessage])


class _NoArguments(BaseModel):
    """The arguments of a prompt whose handler takes none: none may be given."""

    model_config = ConfigDict(extra="forbid")


def _contents(uri: str, mime_type: str, result: object) -> list[ResourceContents]:
    """What a resource handler returned, as contents of ``uri``."""
    if isinstance(result, TextContents | BlobContents):
        return [result]
    if isinstance(result, str):
        return [TextContents(uri=uri, mime_type=mime_type, text=result)]
    if isinstance(result, bytes | bytearray):
        return [BlobContents(uri=uri, mime_type=mime_type, blob=bytes(result))]
    if isinstance(result, BaseModel):
        return [TextContents(uri=uri, mime_type=mime_type, text=result.model_dump_json())]
    if isinstance(result, list) and all(isinstance(r, TextContents | BlobContents) for r in result):
        return list(result)
    raise TypeError(
        "a resource handler returns str, bytes, a pydantic model, or TextContents/BlobContents"
    )


async def complete_values(completer: Completer, value: str, ctx: ToolContext) -> list[str]:
    """Run a completer; at most 100 string values, as MCP allows."""
    found = completer(value, ctx)
    values = await found if inspect.isawaitable(found) else found
    return [str(v) for v in list(values)[:_MAX_COMPLETIONS]]


def _read_handler(
    handler: Callable[..., Any], what: str
) -> tuple[_Call, type[BaseModel] | None, object]:
    """The handler's call shape (params model, context) and its return annotation."""
    hints = type_hints(handler, what)
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{what}: cannot read the handler's signature: {exc}") from None
    model: type[BaseModel] | None = None
    takes_context = False
    for parameter in parameters:
        annotation = hints.get(parameter.name)
        if isinstance(annotation, type) and issubclass(annotation, ToolContext):
            takes_context = True
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel) and model is None:
            model = annotation
        else:
            raise ConfigurationError(
                f"{what}: each handler parameter is a pydantic model (the arguments) or a "
                f"ToolContext (the context); {parameter.name!r} is {annotation!r}"
            )
    call = _Call(
        handler=handler,
        params_model=model,
        takes_context=takes_context,
        is_async=is_async_callable(handler),
    )
    return call, model, hints.get("return")


def _access(
    what: str, required_scopes: Sequence[str], audience: Sequence[str] | None, auth: str
) -> Access:
    if isinstance(required_scopes, str) or isinstance(audience, str):
        raise ConfigurationError(f"{what}: required_scopes and audience are sequences of strings")
    if auth not in _AUTH_MODES:
        raise ConfigurationError(f"{what}: auth must be one of {_AUTH_MODES}, got {auth!r}")
    try:
        scopes = tuple(validate_required_scope(s) for s in required_scopes)
    except ValueError as exc:
        raise ConfigurationError(f"{what}: {exc}") from None
    return Access(
        required_scopes=scopes,
        audience=tuple(audience) if audience is not None else None,
        auth=typing.cast("AuthMode", auth),
    )


def _check_completers(
    what: str, complete: Mapping[str, Completer] | None, names: set[str]
) -> dict[str, Completer]:
    complete = dict(complete or {})
    unknown = sorted(set(complete) - names)
    if unknown:
        raise ConfigurationError(f"{what}: completers for unknown arguments {unknown}")
    return complete


def resource(
    uri: str,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    required_scopes: Sequence[str] = (),
    audience: Sequence[str] | None = None,
    auth: AuthMode = "identity",
    delegable: bool = False,
    tenant_param: str | None = None,
    complete: Mapping[str, Completer] | None = None,
) -> Callable[[Callable[..., Any]], Resource]:
    """Declare a resource (or, with ``{variables}`` in ``uri``, a resource template).

    The handler takes the template's variables as a pydantic model (templates only) and
    optionally the context, and returns ``str`` (text), ``bytes`` (a blob), a pydantic
    model (JSON text) or ``TextContents``/``BlobContents``. ``mime_type`` defaults to
    ``application/json`` for a model, ``application/octet-stream`` for bytes, else
    ``text/plain``. ``complete`` maps template variables to completers.

    Raises:
        ConfigurationError: a malformed URI template, a variable the params model lacks,
            bad scopes or auth mode, completers for unknown variables.
    """

    def declare(handler: Callable[..., Any]) -> Resource:
        what = f"resource {uri!r}"
        if not isinstance(uri, str) or not uri or any(c.isspace() for c in uri):
            raise ConfigurationError(f"{what}: the URI must be a non-empty string without spaces")
        template = UriTemplate(uri) if "{" in uri else None
        call, model, returns = _read_handler(handler, what)
        variables = set(template.variables) if template is not None else set()
        if template is None and model is not None:
            raise ConfigurationError(f"{what}: only a template's handler takes a params model")
        if template is not None:
            if model is None:
                raise ConfigurationError(
                    f"{what}: a template's handler takes its variables as a pydantic model"
                )
            missing = sorted(variables - set(model.model_fields))
            required = {n for n, f in model.model_fields.items() if f.is_required()}
            if missing or not required <= variables:
                raise ConfigurationError(
                    f"{what}: the params model's fields must be the template variables "
                    f"{sorted(variables)}"
                )
        if tenant_param is not None and tenant_param not in variables:
            raise ConfigurationError(
                f"{what}: tenant_param {tenant_param!r} is not a template variable"
            )
        resource_name = name or _function_name(handler)
        if not _NAME_PATTERN.fullmatch(resource_name):
            raise ConfigurationError(
                f"{what}: name {resource_name!r} must use 1-128 letters, digits, '_', '.' or '-'"
            )
        return Resource(
            uri=uri,
            name=resource_name,
            title=title,
            description=_description(description, handler, what),
            mime_type=mime_type or _default_mime(returns),
            access=_access(what, required_scopes, audience, auth),
            delegable=delegable,
            tenant_param=tenant_param,
            complete=_check_completers(what, complete, variables),
            template=template,
            call=call,
        )

    return declare


def prompt(
    name: str | None = None,
    *,
    title: str | None = None,
    description: str | None = None,
    required_scopes: Sequence[str] = (),
    audience: Sequence[str] | None = None,
    auth: AuthMode = "identity",
    complete: Mapping[str, Completer] | None = None,
) -> Callable[[Callable[..., Any]], Prompt]:
    """Declare a prompt.

    The handler takes its arguments as a pydantic model of string fields (MCP prompt
    arguments are strings) and optionally the context, and returns ``str`` (one user
    message) or a list of ``PromptMessage``. ``complete`` maps arguments to completers.

    Raises:
        ConfigurationError: a bad name, a non-string argument, bad scopes or auth mode,
            completers for unknown arguments.
    """

    def declare(handler: Callable[..., Any]) -> Prompt:
        prompt_name = name or _function_name(handler)
        what = f"prompt {prompt_name!r}"
        if not _NAME_PATTERN.fullmatch(prompt_name):
            raise ConfigurationError(
                f"{what}: the name must use 1-128 letters, digits, '_', '.' or '-'"
            )
        call, model, _ = _read_handler(handler, what)
        arguments: list[PromptArgument] = []
        for arg_name, info in model.model_fields.items() if model is not None else ():
            if info.annotation not in (str, str | None):
                raise ConfigurationError(
                    f"{what}: argument {arg_name!r} must be a str "
                    "(MCP prompt arguments are strings)"
                )
            arguments.append(
                PromptArgument(
                    name=info.alias or arg_name,
                    description=info.description,
                    required=info.is_required(),
                )
            )
        return Prompt(
            name=prompt_name,
            title=title,
            description=_description(description, handler, what),
            arguments=tuple(arguments),
            access=_access(what, required_scopes, audience, auth),
            complete=_check_completers(what, complete, {a.name for a in arguments}),
            call=call,
        )

    return declare


def _function_name(handler: Callable[..., Any]) -> str:
    return str(getattr(handler, "__name__", "")).strip("_") or "unnamed"


def _description(given: str | None, handler: Callable[..., Any], what: str) -> str:
    text = given if given is not None else inspect.getdoc(handler) or ""
    text = text.strip()
    if not text:
        raise ConfigurationError(f"{what}: a description (or a docstring) is required")
    return text


def _default_mime(returns: object) -> str:
    if isinstance(returns, type) and issubclass(returns, BaseModel):
        return "application/json"
    if returns in (bytes, bytearray):
        return "application/octet-stream"
    return "text/plain"
