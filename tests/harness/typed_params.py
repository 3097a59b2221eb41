"""Check a dict against an SDK's TypedDict params: types (pydantic) and no unknown keys."""

from __future__ import annotations

import collections.abc
import typing
from typing import Any

import pytest
from pydantic import TypeAdapter
from typing_extensions import is_typeddict


def sdk(module: str) -> Any:
    """A provider SDK's module (``"openai.types.chat"``), or skip the test without it.

    Tests import the SDKs when they run, never at collection: importing them costs every
    pytest-xdist worker seconds of CPU (``anthropic`` alone about two), for a few tests.
    """
    return pytest.importorskip(module)


def assert_conforms(tp: Any, value: Any) -> None:
    """Fail unless ``value`` validates as ``tp`` and every TypedDict key is one ``tp`` knows."""
    TypeAdapter(tp).validate_python(value)
    problem = _unknown_keys(tp, value, "$")
    assert problem is None, problem


def _unknown_keys(tp: Any, value: Any, path: str) -> str | None:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unknown_keys(typing.get_args(tp)[0], value, path)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        problems = [_unknown_keys(arg, value, path) for arg in typing.get_args(tp)]
        return None if any(p is None for p in problems) else problems[0]
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return f"{path}: expected an object for {tp.__name__}"
        hints = typing.get_type_hints(tp)
        extra = set(value) - set(hints)
        if extra:
            return f"{path}: {tp.__name__} has no key(s) {sorted(extra)}"
        for key, item in value.items():
            problem = _unknown_keys(hints[key], item, f"{path}.{key}")
            if problem is not None:
                return problem
        return None
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence) and isinstance(
        value, list
    ):
        (arg,) = typing.get_args(tp) or (Any,)
        for index, item in enumerate(value):
            problem = _unknown_keys(arg, item, f"{path}[{index}]")
            if problem is not None:
                return problem
    return None
