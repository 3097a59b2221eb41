"""Input models from an upstream tool's JSON Schema, and result models per upstream tool.

charter validates a tool's input once, with a pydantic model, before anything else
touches it. An upstream tool has a JSON Schema instead, so its model keeps every
argument as given (``extra="allow"``), checks them against that schema with
``jsonschema`` (a dependency of the MCP SDK), and publishes the schema unchanged.

An argument the schema marks secret (``"writeOnly": true`` or ``"format": "password"``,
as pydantic writes a ``SecretStr``) is kept as a ``pydantic.Secret``: the fingerprint and
so any approval bind its value, and the approver's view shows ``{"$secret": "bound"}``,
as for a ``SecretStr`` field of charter's own tools. ``sent`` unwraps it for the upstream.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import jsonschema
import referencing
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Secret, model_validator
from pydantic_core import PydanticCustomError, SchemaValidator, core_schema
from pydantic_core import SchemaError as SchemaError_
from pydantic_core import ValidationError as ValidationError_

from .._json_schema import iter_refs, resolve_pointer
from ..errors import ConfigurationError
from ..mcp import ForwardedResult

__all__ = ("UpstreamInput", "input_model", "result_model")

_MAX_ISSUES = 20


class UpstreamInput(BaseModel):
    """Arguments of an upstream tool: kept as given, checked against the upstream's schema."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    upstream_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    """The upstream tool's input schema, published unchanged."""
    upstream_validator: ClassVar[Any] = None
    """The ``jsonschema`` validator of ``upstream_schema``."""
    upstream_secrets: ClassVar[frozenset[str]] = frozenset()
    """The top-level arguments the schema marks secret (``_secret_arguments``)."""

    @model_validator(mode="before")
    @classmethod
    def _matches_upstream_schema(cls, data: Any) -> Any:
        validator = cls.upstream_validator
        if validator is None:
            return data
        problems = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if problems:
            text = "; ".join(_problem(p) for p in problems[:_MAX_ISSUES])
            raise PydanticCustomError("upstream_schema", "{problems}", {"problems": text})
        secrets = cls.upstream_secrets
        if secrets and isinstance(data, dict):
            return {k: Secret(v) if k in secrets else v for k, v in data.items()}
        return data

    def sent(self) -> dict[str, Any]:
        """The arguments as the upstream gets them: every one, secrets in clear."""
        extra = self.__pydantic_extra__ or {}
        return {k: v.get_secret_value() if isinstance(v, Secret) else v for k, v in extra.items()}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The upstream tool's input schema, unchanged."""
        return copy.deepcopy(cls.upstream_schema)


def _problem(error: jsonschema.ValidationError) -> str:
    """Where and which rule, never the value (it may be a secret)."""
    where = ".".join(str(part) for part in error.absolute_path) or "(root)"
    if error.validator in ("required", "additionalProperties", "dependentRequired"):
        return f"{where}: {error.message}"
    rule = error.validator_value
    shown = f" {rule!r}" if isinstance(rule, str | int | float | bool) else ""
    return f"{where}: does not satisfy the schema's {error.validator!r}{shown} rule"


def input_model(tool_name: str, schema: dict[str, Any]) -> type[UpstreamInput]:
    """A model for one upstream tool's arguments.

    Raises:
        ConfigurationError: the upstream's schema is not a valid JSON Schema of an object.
    """
    if schema.get("type", "object") != "object":
        raise ConfigurationError(
            f"tool {tool_name!r}: the upstream's input schema is not an object"
        )
    validator_class = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except SchemaError as exc:
        raise ConfigurationError(
            f"tool {tool_name!r}: the upstream's input schema is invalid: {exc.message}"
        ) from None
    remote = _remote_ref(schema)
    if remote is not None:
        raise ConfigurationError(
            f"tool {tool_name!r}: the upstream's input schema refers outside itself "
            f"($ref {remote[:100]!r}); charter fetches nothing to validate arguments"
        )
    checking = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        validator_class, {"pattern": _linear_pattern}
    )
    namespace = {
        "upstream_schema": copy.deepcopy(schema),
        # An empty registry: a $ref is resolved within the schema, never fetched.
        "upstream_validator": checking(schema, registry=referencing.Registry()),
        "upstream_secrets": _secret_arguments(schema),
        "__doc__": f"Arguments of {tool_name}, checked against the upstream's schema.",
        "__module__": __name__,
    }
    return type(_class_name(tool_name, "Input"), (UpstreamInput,), namespace)


def _secret_arguments(schema: dict[str, Any]) -> frozenset[str]:
    """The top-level properties ``schema`` marks secret: ``writeOnly`` or a password format.

    Also through a local ``$ref`` and the branches of ``anyOf``, ``oneOf`` and ``allOf``:
    pydantic writes an optional ``SecretStr`` as ``anyOf`` of the secret and ``null``.
    """
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return frozenset()
    return frozenset(
        name for name, rule in properties.items() if _marks_secret(rule, schema, depth=0)
    )


_MAX_SECRET_DEPTH = 8


def _marks_secret(rule: object, root: dict[str, Any], *, depth: int) -> bool:
    if not isinstance(rule, dict) or depth > _MAX_SECRET_DEPTH:
        return False
    if rule.get("writeOnly") is True or rule.get("format") == "password":
        return True
    ref = rule.get("$ref")
    if isinstance(ref, str) and _marks_secret(resolve_pointer(root, ref), root, depth=depth + 1):
        return True
    return any(
        _marks_secret(branch, root, depth=depth + 1)
        for key in ("anyOf", "oneOf", "allOf")
        for branch in rule.get(key) or ()
    )


def _remote_ref(schema: object) -> str | None:
    """The first ``$ref`` in ``schema`` that is not a pointer into it (``#…``), if any."""
    return next((ref for ref in iter_refs(schema) if not ref.startswith("#")), None)


@functools.lru_cache(maxsize=256)
def _pattern_matcher(pattern: str) -> Callable[[str], bool]:
    """``pattern``'s search in linear time (pydantic-core's Rust regex), else Python's ``re``.

    Python's backtracking engine takes exponential time on some patterns, and arguments
    are checked on the event loop: one caller could stall every other. The Rust engine
    refuses what it cannot run in linear time (lookarounds, backreferences); those
    patterns keep Python's engine.
    """
    try:
        checker = SchemaValidator(core_schema.str_schema(pattern=pattern))
    except SchemaError_:
        compiled = re.compile(pattern)
        return lambda text: compiled.search(text) is not None

    def matches(text: str) -> bool:
        try:
            checker.validate_python(text)
        except ValidationError_:
            return False
        return True

    return matches


def _linear_pattern(
    validator: Any, pattern: str, instance: object, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    """The ``pattern`` keyword of jsonschema, matched by ``_pattern_matcher``."""
    if isinstance(instance, str) and not _pattern_matcher(pattern)(instance):
        yield jsonschema.ValidationError("the text does not match the pattern")


def result_model(tool_name: str, output_schema: dict[str, Any] | None) -> type[ForwardedResult]:
    """The output model of one upstream tool: its result, listing its own output schema."""
    namespace = {
        "mcp_output_schema": copy.deepcopy(output_schema) if output_schema else None,
        "__doc__": f"The result of {tool_name}, as its upstream sent it.",
        "__module__": __name__,
    }
    return type(_class_name(tool_name, "Result"), (ForwardedResult,), namespace)


def _class_name(tool_name: str, suffix: str) -> str:
    words = [part for part in tool_name.replace("-", ".").replace("_", ".").split(".") if part]
    return "".join(word[:1].upper() + word[1:] for word in words) + suffix
