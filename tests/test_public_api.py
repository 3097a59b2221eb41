from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys
from types import ModuleType

import pytest
from tests.builders import packages_loaded_by

import charter

FORBIDDEN_ON_IMPORT = ("mcp", "starlette", "sqlalchemy", "httpx", "uvicorn", "typer")

# Modules that exist only with an extra installed; they are checked when importable.
PUBLIC_MODULES = sorted(
    f"charter.{info.name}"
    for info in pkgutil.iter_modules(charter.__path__)
    if not info.name.startswith("_")
)


def public_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # an extra that is not installed
        pytest.skip(f"{name} needs an extra: {exc}")


def defined_public_names(module: ModuleType) -> set[str]:
    """The public classes and functions ``module`` defines itself (not those it imports)."""
    return {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == module.__name__
    }


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 calls isort-style: CONSTANTS, then Classes, then the rest."""
    if name.isupper() or (name.upper() == name and not name.startswith("_")):
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_importing_charter_imports_no_transport_or_storage_library() -> None:
    assert packages_loaded_by("charter", FORBIDDEN_ON_IMPORT) == []


def test_the_package_exports_the_contract() -> None:
    for name in (
        "define_tool",
        "tool",
        "Tool",
        "RiskTier",
        "RiskPolicy",
        "ActionPolicy",
        "ToolContext",
        "Completed",
        "Denied",
        "Failed",
        "InteractionRequired",
        "Deferred",
        "Interaction",
        "Registry",
        "ToolError",
        "ErrorCode",
        "ConfigurationError",
    ):
        assert name in charter.__all__, name


@pytest.mark.parametrize("name", ["charter", *PUBLIC_MODULES])
def test_all_is_a_sorted_tuple(name: str) -> None:
    module = public_module(name)
    exported = module.__all__
    assert isinstance(exported, tuple)
    assert list(exported) == sorted(exported, key=isort_key)
    assert len(set(exported)) == len(exported)


@pytest.mark.parametrize("name", ["charter", *PUBLIC_MODULES])
def test_every_name_in_all_exists(name: str) -> None:
    module = public_module(name)
    missing = [attr for attr in module.__all__ if not hasattr(module, attr)]
    assert missing == []


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_lists_every_public_class_and_function_defined_in_the_module(name: str) -> None:
    module = public_module(name)
    assert sorted(defined_public_names(module) - set(module.__all__)) == []


def test_the_package_re_exports_every_name_of_the_core_modules_it_imports_from() -> None:
    for name in ("charter.outcome", "charter.registry"):
        module = importlib.import_module(name)
        for attr in module.__all__:
            value = getattr(module, attr)
            if inspect.isclass(value) and attr in charter.__all__:
                assert getattr(charter, attr) is value


@pytest.mark.parametrize("name", ["charter", *PUBLIC_MODULES])
def test_every_public_dataclass_is_keyword_only(name: str) -> None:
    module = public_module(name)
    for attr in module.__all__:
        value = getattr(module, attr)
        if inspect.isclass(value) and dataclasses.is_dataclass(value):
            positional = [f.name for f in dataclasses.fields(value) if f.init and not f.kw_only]
            assert positional == [], f"{name}.{attr} takes {positional} positionally"


def test_the_package_loads_a_module_when_one_of_its_names_is_first_used() -> None:
    # `import charter` leaves the host and the ledger unloaded (the `charter` command's
    # HTTP-only runs never need them); `from charter import tool` is the decorator even
    # after the module charter.tool was imported under the same name.
    code = (
        "import sys, charter, charter.manifest; "
        "assert 'charter.host' not in sys.modules and 'charter.ledger' not in sys.modules; "
        "from charter import Host, tool; from charter.host import Host as H; "
        "assert Host is H and callable(tool) and charter.tool is tool"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
