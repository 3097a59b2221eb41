"""Load the registry a `charter` command works on from a `module:attribute` spec."""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from charter.errors import ConfigurationError

__all__ = (
    "ManifestSource",
    "import_target",
    "load_target",
    "manifest_of",
    "registry_of",
    "required_parameters",
)


@runtime_checkable
class ManifestSource(Protocol):
    """Protocol: anything that renders the discovery manifest as JSON, like a `Registry`."""

    def manifest_json(self) -> str:
        """The whole manifest as stable JSON."""
        ...


def import_target(spec: str) -> object:
    """Import `module:attribute` (the attribute may be dotted) and return it, uncalled.

    Raises:
        ConfigurationError: The spec is malformed, the module cannot be imported, or the
            attribute is missing.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(
            f"target {spec!r} must look like 'module:attribute', e.g. 'myapp.tools:registry'"
        )
    try:
        obj: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import module {module_name!r}: {exc}") from exc
    except Exception as exc:
        # The user's module failed while running; say where, keep the cause for --debug.
        raise ConfigurationError(f"importing module {module_name!r} failed: {exc!r}") from exc
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ConfigurationError(
                f"module {module_name!r} has no attribute {attribute!r}"
            ) from exc
    return obj


def load_target(spec: str) -> object:
    """Import `module:attribute` and return the object, calling a factory once.

    A zero-argument factory that is neither a registry nor a host is called once and its
    result returned. (`charter serve` and friends also accept async factories and
    factories that take the opened store; see `charter.cli._host`.)

    Raises:
        ConfigurationError: The spec is malformed, the module cannot be imported, the
            attribute is missing, or the factory needs arguments or fails.
    """
    obj = import_target(spec)
    if _is_registry_or_host(obj) or not callable(obj):
        return obj
    needed = required_parameters(obj)
    if needed:
        raise ConfigurationError(
            f"the factory {spec!r} needs arguments ({', '.join(needed)}); point this command "
            "at a Registry, a Host, or a factory without parameters"
        )
    try:
        return obj()
    except Exception as exc:
        # Anything the user's factory raises is reported as a target problem, with the cause.
        raise ConfigurationError(f"calling the factory {spec!r} failed: {exc!r}") from exc


def required_parameters(factory: Callable[..., object]) -> list[str]:
    """The names of the parameters ``factory`` cannot be called without."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return []  # a builtin or extension callable without a signature: just call it
    return [
        p.name
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _is_registry_or_host(obj: object) -> bool:
    return isinstance(obj, ManifestSource) or isinstance(
        getattr(obj, "registry", None), ManifestSource
    )


def registry_of(obj: object) -> ManifestSource:
    """The registry behind a `Registry` or a `Host` (its `.registry`).

    Raises:
        ConfigurationError: The object is neither.
    """
    if isinstance(obj, ManifestSource):
        return obj
    registry = getattr(obj, "registry", None)
    if isinstance(registry, ManifestSource):
        return registry
    raise ConfigurationError(
        f"{type(obj).__name__} is not a charter Registry or Host "
        "(expected an object with manifest_json(), or a .registry that has one)"
    )


def manifest_of(obj: object) -> list[dict[str, object]]:
    """The manifest entries of a `Registry` or a `Host`, as plain JSON values.

    Raises:
        ConfigurationError: The object is neither, or its manifest is not a list of entries.
    """
    document = json.loads(registry_of(obj).manifest_json())
    if not isinstance(document, list) or not all(isinstance(e, dict) for e in document):
        raise ConfigurationError("manifest_json() did not return a JSON list of tool entries")
    return document
