"""Reading a plain function's docstring: its prose, and what it says of each parameter.

Google, NumPy and Sphinx styles are parsed by griffe (the parser pydantic-ai uses), which
is imported here, on first need, and never by ``import charter``: a docstring with no
sections at all is the description as it stands and needs no parser. The style is
inferred per docstring from its section markers (``Args:``, ``Parameters`` over a
``----`` rule, ``:param x:``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from griffe import DocstringSection

__all__ = ("FunctionDocs", "read_docstring")

DocstringStyle = Literal["google", "numpy", "sphinx"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FunctionDocs:
    """What a docstring says, split the way a tool uses it."""

    description: str
    """The prose: text and admonitions (``Note:``), without the parameter, returns,
    raises or examples sections, which the schemas carry or a caller has no use for."""
    parameters: dict[str, str] = field(default_factory=dict)
    """Each documented parameter's description, by parameter name (``*`` stripped)."""
    returns: str | None = None
    """The returns section's description, if any."""


def read_docstring(doc: str, tool_name: str) -> FunctionDocs:
    """Split a (cleaned) docstring into prose, parameter descriptions and returns.

    Raises:
        ConfigurationError: the docstring has sections and griffe is not installed.
    """
    style = _style(doc)
    if style is None:
        return FunctionDocs(description=doc.strip())
    try:
        from griffe import Docstring
    except ImportError:  # pragma: no cover - griffelib is a dependency of charter
        raise ConfigurationError(
            f"tool {tool_name!r}: reading parameter descriptions from a docstring needs "
            "griffe; install it with `pip install griffelib` (a dependency of charter)"
        ) from None
    sections = Docstring(doc, lineno=1, parser=style, parser_options=_options(style)).parse()
    return _split(sections)


def _split(sections: list[DocstringSection]) -> FunctionDocs:
    from griffe import (
        DocstringSectionAdmonition,
        DocstringSectionParameters,
        DocstringSectionReturns,
        DocstringSectionText,
    )

    prose: list[str] = []
    parameters: dict[str, str] = {}
    returns: str | None = None
    for section in sections:
        if isinstance(section, DocstringSectionText):
            prose.append(section.value)
        elif isinstance(section, DocstringSectionAdmonition):
            prose.append(f"{section.title}: {section.value.description}")
        elif isinstance(section, DocstringSectionParameters):
            # Google's "Keyword Args:" and "Other Parameters" parse to a subclass; a
            # parameter described twice keeps its first description.
            for parameter in section.value:
                parameters.setdefault(parameter.name.lstrip("*"), parameter.description)
        elif isinstance(section, DocstringSectionReturns) and returns is None:
            text = "\n".join(item.description for item in section.value if item.description)
            returns = text or None
    return FunctionDocs(
        description="\n\n".join(part.strip() for part in prose if part.strip()),
        parameters={name: text for name, text in parameters.items() if text},
        returns=returns,
    )


def _options(style: DocstringStyle) -> Any:
    from griffe import GoogleOptions, NumpyOptions, SphinxOptions

    # warnings=False: griffe would log about every parameter without a type in the
    # docstring, and the types are in the signature.
    if style == "google":
        return GoogleOptions(
            returns_named_value=False, returns_multiple_items=False, warnings=False
        )
    if style == "numpy":
        return NumpyOptions(warnings=False)
    return SphinxOptions(warnings=False)


_SPHINX = re.compile(
    r"^[ \t]*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except|"
    r"exception)\b[^:\n]*:",
    re.MULTILINE,
)
_NUMPY = re.compile(
    r"^[ \t]*(parameters|other parameters|returns|yields|receives|raises|warns|attributes|"
    r"examples|notes|see also|references|deprecated)[ \t]*\n[ \t]*-{3,}[ \t]*$",
    re.MULTILINE | re.IGNORECASE,
)
_GOOGLE = re.compile(
    r"^[ \t]*(args|arguments|params|parameters|keyword args|keyword arguments|other args|"
    r"other arguments|other params|other parameters|returns?|yields|receives|raises|"
    r"exceptions|warns|warnings|examples?|notes?|attributes|todo|see also|references|"
    r"warning|tip|important|caution|danger|attention|hint)[ \t]*:[ \t]*\n[ \t]+\S",
    re.MULTILINE | re.IGNORECASE,
)


def _style(doc: str) -> DocstringStyle | None:
    """The docstring's style from its section markers, or None when it has no sections."""
    if _SPHINX.search(doc):
        return "sphinx"
    if _NUMPY.search(doc):
        return "numpy"
    if _GOOGLE.search(doc):
        return "google"
    return None
