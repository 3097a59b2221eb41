"""The gateway's configuration: upstream MCP servers and the policy charter applies to them.

The same models serve the TOML file (``load_config``) and Python callers
(``UpstreamConfig(...)``). Values of ``env`` and ``headers`` may name environment
variables as ``${NAME}``; they are read when the upstream is connected, so the file holds
no secrets and a missing variable is an error that names it (never a value).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigurationError
from ..tool import NAME_PATTERN

__all__ = (
    "GatewayConfig",
    "ToolPolicy",
    "UpstreamConfig",
    "expand_env",
    "load_config",
)

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\$")
_NAMESPACE = re.compile(r"[A-Za-z0-9_-]{1,64}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolPolicy(_Strict):
    """How charter governs one upstream tool (or, as ``default``, every unnamed one).

    Every field left unset falls back to the upstream's ``default`` policy, then to what
    the upstream's annotations suggest: ``readOnlyHint`` → read; ``destructiveHint`` →
    destructive, with approval; anything else → write, with confirmation.
    """

    tier: Literal["read", "write", "sensitive", "destructive"] | None = None
    """The risk tier; decides the default ledger, confirmation and approval."""
    scopes: tuple[str, ...] | None = None
    """Scopes a caller must hold (ANDed); none by default."""
    auth: Literal["public", "identity", "admin"] | None = None
    """Who may call at all (``identity``, an authenticated caller, by default)."""
    audience: tuple[str, ...] | None = None
    """Audiences that see the tool; every audience by default."""
    confirmation: bool | None = None
    """The caller must send ``confirmed: true``."""
    approval: bool | None = None
    """A person must approve each call, bound to its exact arguments."""
    ledger: Literal["required", "optional", "never"] | None = None
    """Whether calls go through the exactly-once ledger (a requestId keys each one)."""
    hidden: bool | None = None
    """Not registered at all: charter's callers never see or reach it."""
    rename: str | None = None
    """The tool's name under the namespace instead of the upstream's (``fs.read``)."""
    description: str | None = None
    """The description callers see instead of the upstream's."""

    @field_validator("scopes", "audience", mode="before")
    @classmethod
    def _not_a_string(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError("must be a list of strings, not a string")
        return value

    @field_validator("rename")
    @classmethod
    def _a_tool_name(cls, value: str | None) -> str | None:
        if value is not None and not NAME_PATTERN.fullmatch(value):
            raise ValueError("must use 1-128 letters, digits, '_', '.' or '-'")
        return value

    def over(self, fallback: ToolPolicy) -> ToolPolicy:
        """This policy, with every unset field taken from ``fallback``."""
        mine = self.model_dump(exclude_unset=True, exclude_none=True)
        return ToolPolicy.model_validate({**fallback.model_dump(exclude_none=True), **mine})


def _default_policy(value: object) -> object:
    """``default = "hidden"`` is short for ``default = { hidden = true }``."""
    if value == "hidden":
        return {"hidden": True}
    return value


class UpstreamConfig(_Strict):
    """One upstream MCP server: how to reach it and the policy over its tools."""

    name: str
    """The upstream's name (the TOML table's); also its default namespace."""
    command: tuple[str, ...] | None = None
    """Start the server as a subprocess and speak MCP over its stdin and stdout."""
    url: str | None = None
    """Reach the server over streamable HTTP at this URL."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for a ``command`` (``${NAME}`` reads one of charter's)."""
    cwd: str | None = None
    """The working directory of a ``command``."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers for a ``url`` (``Authorization = "Bearer ${TOKEN}"``)."""
    namespace: str | None = None
    """Prefix of the tools' charter names (``fs`` → ``fs.read_file``); default ``name``."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds one call may take upstream; then a read is ``TIMEOUT`` (retryable) and a
    ledgered call's outcome is recorded as unknown (docs/gateway.md)."""
    default: ToolPolicy = Field(default_factory=ToolPolicy)
    """The policy of every tool not named in ``tools`` (``"hidden"`` hides them)."""
    tools: dict[str, ToolPolicy] = Field(default_factory=dict)
    """Per-tool policy, by the upstream's tool name."""

    @field_validator("default", mode="before")
    @classmethod
    def _hidden_shorthand(cls, value: object) -> object:
        return _default_policy(value)

    @field_validator("command", mode="before")
    @classmethod
    def _command_list(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError('must be a list, e.g. ["npx", "-y", "@scope/server", "arg"]')
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> UpstreamConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command = [...] (stdio) or url = '...' (HTTP)")
        if self.command is not None and not self.command:
            raise ValueError("command must name a program")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must be an http:// or https:// URL")
        if self.headers and self.url is None:
            raise ValueError("headers apply to a url upstream; a command upstream takes env")
        if not _NAMESPACE.fullmatch(self.effective_namespace):
            raise ValueError(
                f"namespace {self.effective_namespace!r} must be 1-64 letters, digits, '_' or '-'"
            )
        if self.default.rename is not None:
            raise ValueError("the default policy cannot rename; rename a tool in its own table")
        return self

    @property
    def effective_namespace(self) -> str:
        """The prefix of this upstream's tool names."""
        return self.namespace if self.namespace is not None else self.name

    def policy_for(self, tool: str) -> ToolPolicy:
        """The configured policy of one upstream tool: its own table over ``default``."""
        own = self.tools.get(tool)
        if own is None:
            return self.default
        # Naming a tool shows it, even when the default hides the rest.
        return own.over(self.default.model_copy(update={"hidden": None}))


class GatewayConfig(_Strict):
    """Every upstream, by name."""

    upstreams: dict[str, UpstreamConfig] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _names_from_tables(cls, data: object) -> object:
        """``[upstreams.fs]`` names its upstream ``fs``."""
        if isinstance(data, Mapping) and isinstance(data.get("upstreams"), Mapping):
            tables = data["upstreams"]
            named = {
                key: {"name": key, **value} if isinstance(value, Mapping) else value
                for key, value in tables.items()
            }
            return {**data, "upstreams": named}
        return data

    @model_validator(mode="after")
    def _distinct_namespaces(self) -> GatewayConfig:
        seen: dict[str, str] = {}
        for name, upstream in self.upstreams.items():
            if upstream.name != name:
                raise ValueError(f"upstream {name!r} is named {upstream.name!r} inside")
            other = seen.setdefault(upstream.effective_namespace, name)
            if other != name:
                raise ValueError(
                    f"upstreams {other!r} and {name!r} share the namespace "
                    f"{upstream.effective_namespace!r}; give one a namespace of its own"
                )
        return self

    @classmethod
    def of(cls, *upstreams: UpstreamConfig) -> GatewayConfig:
        """A configuration of the given upstreams (the Python form of the file)."""
        return cls(upstreams={u.name: u for u in upstreams})


def load_config(path: str | Path) -> GatewayConfig:
    """Read an upstreams TOML file.

    Raises:
        ConfigurationError: the file is missing, is not TOML, or does not describe
            upstreams; the message names the file and each problem's place.
    """
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"{file}: no such upstreams file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{file}: cannot read it: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{file}: not valid TOML: {exc}") from None
    if not data.get("upstreams"):
        raise ConfigurationError(f"{file}: no [upstreams.<name>] tables")
    return parse_config(data, source=str(file))


def parse_config(
    data: Mapping[str, Any], *, source: str = "the gateway configuration"
) -> GatewayConfig:
    """Validate configuration data (a parsed TOML document).

    Raises:
        ConfigurationError: the data does not describe upstreams; names each problem's place.
    """
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '(top)'}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        )
        raise ConfigurationError(f"{source}: {problems}") from None


def expand_env(
    values: Mapping[str, str], *, where: str, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``values`` with each ``${NAME}`` replaced by that environment variable (``$$`` is ``$``).

    Raises:
        ConfigurationError: a named variable is not set; the message names it, and where.
    """
    source = os.environ if environ is None else environ

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        value = source.get(name)
        if value is None:
            raise ConfigurationError(
                f"{where} names the environment variable {name}, which is not set"
            )
        return value

    return {key: _ENV_REFERENCE.sub(replace, value) for key, value in values.items()}
