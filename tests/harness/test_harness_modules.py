"""Every public module of the harness lists its public names in a sorted ``__all__`` tuple."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from tests.test_public_api import defined_public_names, isort_key

import charter.harness

HARNESS_MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(charter.harness.__path__, "charter.harness.")
    if not info.name.rsplit(".", 1)[-1].startswith("_")
)


def test_the_harness_package_holds_its_provider_formats() -> None:
    assert "charter.harness.providers" in HARNESS_MODULES


@pytest.mark.parametrize("name", ["charter.harness", *HARNESS_MODULES])
def test_all_is_a_sorted_tuple_of_every_public_class_and_function(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert isinstance(exported, tuple)
    assert list(exported) == sorted(set(exported), key=isort_key)
    assert [attr for attr in exported if not hasattr(module, attr)] == []
    assert sorted(defined_public_names(module) - set(exported)) == []
