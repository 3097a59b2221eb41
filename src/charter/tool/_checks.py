"""Definition-time checks: a declaration the host could not serve is refused before serving."""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

from pydantic import AliasChoices, AliasPath, BaseModel, RootModel

from .._numbers import is_positive_seconds
from ..auth import AuthMode, validate_required_scope
from ..errors import ConfigurationError
from ..policy import CONTROL_FIELD, ActionPolicy

__all__ = (
    "MODEL_NAME_PATTERN",
    "NAME_PATTERN",
    "check_action_policy",
    "check_declaration",
    "check_input_fields",
)

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
"""Tool names and aliases: 1-128 letters, digits, ``_``, ``.`` or ``-``."""

MODEL_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
"""Model-facing tool names: what every supported model API accepts as a function name.

A letter or ``_``, then letters, digits, ``_`` or ``-``, at most 64 in all: OpenAI,
Anthropic and Gemini's rules at once (docs/harness.md lists them with their sources).
``charter.harness.names`` maps every tool to such a name; ``model_name=`` must be one.
"""


def check_declaration(
    *,
    name: str,
    aliases: tuple[str, ...],
    input_model: object,
    output_model: object,
    description: str,
    required_scopes: tuple[str, ...],
    auth: AuthMode,
    enforcement: Literal["generic", "handler"],
    delegable: bool,
    timeout: float | None,
    action_policy: ActionPolicy | None,
    model_name: str | None = None,
) -> None:
    """Reject a tool declaration charter cannot serve; raises ``ConfigurationError``.

    Checked before anything is derived from the declaration: names and aliases, that
    both models are pydantic models of JSON objects, the description, the options and
    the action policy.
    """
    _check_names(name, aliases, model_name)
    _check_models(name, input_model, output_model)
    if not description.strip():
        raise ConfigurationError(f"tool {name!r}: a description is required")
    for scope in required_scopes:
        try:
            validate_required_scope(scope)
        except ValueError as exc:
            raise ConfigurationError(f"tool {name!r}: {exc}") from None
    if auth not in get_args(AuthMode):
        raise ConfigurationError(
            f"tool {name!r}: auth must be one of {list(get_args(AuthMode))}, got {auth!r}"
        )
    if enforcement not in ("generic", "handler"):
        raise ConfigurationError(
            f"tool {name!r}: enforcement must be 'generic' or 'handler', got {enforcement!r}"
        )
    if not isinstance(delegable, bool):
        raise ConfigurationError(f"tool {name!r}: delegable must be True or False")
    if auth == "public" and delegable:
        raise ConfigurationError(f"tool {name!r}: a public tool cannot be delegable")
    if timeout is not None and not is_positive_seconds(timeout):
        raise ConfigurationError(
            f"tool {name!r}: timeout must be a finite, positive number of seconds, got {timeout!r}"
        )
    if action_policy is not None:
        check_action_policy(name, action_policy, enforcement)


def _check_names(name: str, aliases: tuple[str, ...], model_name: str | None) -> None:
    for candidate in (name, *aliases):
        if not isinstance(candidate, str) or not NAME_PATTERN.fullmatch(candidate):
            raise ConfigurationError(
                f"tool name or alias {candidate!r} must use 1-128 letters, digits, '_', '.' or '-'"
            )
    if name in aliases:
        raise ConfigurationError(f"tool {name!r}: an alias repeats the canonical name")
    if model_name is not None and not (
        isinstance(model_name, str) and MODEL_NAME_PATTERN.fullmatch(model_name)
    ):
        raise ConfigurationError(
            f"tool {name!r}: model_name {model_name!r} must start with a letter or '_' and "
            "use at most 64 letters, digits, '_' or '-' (what model APIs accept)"
        )


def _check_models(name: str, input_model: object, output_model: object) -> None:
    for role, model in (("input", input_model), ("output", output_model)):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigurationError(
                f"tool {name!r}: the {role} schema must be a pydantic BaseModel subclass, "
                f"got {model!r}"
            )
        if issubclass(model, RootModel):
            raise ConfigurationError(
                f"tool {name!r}: the {role} model must describe a JSON object, not a RootModel"
            )


def check_action_policy(
    name: str, policy: ActionPolicy, enforcement: Literal["generic", "handler"]
) -> None:
    """Reject an action policy the host cannot enforce; raises ``ConfigurationError``."""
    if policy.target_lifecycle == "created":
        problems = []
        if policy.created_target is None:
            problems.append("missing created_target command metadata")
        if enforcement != "handler":
            problems.append('requires enforcement="handler"')
        if policy.kind != "execute":
            problems.append('requires kind="execute"')
        if policy.ledger != "required":
            problems.append('requires ledger="required"')
        if problems:
            raise ConfigurationError(
                f"tool {name!r}: a created-target action policy {'; '.join(problems)}"
            )
        created = policy.created_target
        assert created is not None
        if not created.command_target_type.strip() or not created.result_reference_type.strip():
            raise ConfigurationError(f"tool {name!r}: created_target types must be non-empty")
        if ":" in created.result_reference_type:
            raise ConfigurationError(f"tool {name!r}: result_reference_type may not contain ':'")
    elif policy.created_target is not None:
        raise ConfigurationError(
            f'tool {name!r}: declares created_target without target_lifecycle="created"'
        )
    if not policy.target_type.strip():
        raise ConfigurationError(f"tool {name!r}: action policy target_type must be non-empty")
    if policy.ledger == "never" and (policy.approval != "never" or enforcement == "handler"):
        raise ConfigurationError(
            f'tool {name!r}: ledger="never" cannot be combined with approvals or handler '
            "enforcement (both need the ledger)"
        )


def check_input_fields(
    name: str,
    input_model: type[BaseModel],
    input_schema: dict[str, Any],
    tenant_field: str | None,
) -> None:
    """Reject an input that declares the reserved control field or lacks the tenant field.

    Raises:
        ConfigurationError: The input model can be populated from ``_charter``, or
            ``tenant_field`` is not one of its properties.
    """
    properties = input_schema.get("properties", {})
    if _declares_control_field(input_model) or (
        isinstance(properties, dict) and CONTROL_FIELD in properties
    ):
        raise ConfigurationError(
            f"tool {name!r}: the input may not declare {CONTROL_FIELD!r}; "
            "it is reserved for invocation controls"
        )
    if tenant_field is not None and tenant_field not in properties:
        raise ConfigurationError(
            f"tool {name!r}: tenant_field {tenant_field!r} is not a field of the input model"
        )


def _declares_control_field(model: type[BaseModel]) -> bool:
    """Whether any field of ``model`` can be populated from the reserved control field.

    The schema's property names show plain aliases; validation aliases with several
    choices or paths do not appear there, so they are checked here.
    """
    for name, info in model.model_fields.items():
        names: list[object] = [name, info.alias]
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        for choice in choices:
            names.append(choice.path[0] if isinstance(choice, AliasPath) else choice)
        if CONTROL_FIELD in names:
            return True
    return False
