"""A prepared action: input validated once, target resolved, for one dispatch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .._fingerprint import canonical_input, shown_input
from .._frozen import set_fields
from ..manifest import RegisteredTool

__all__ = ("PreparedAction",)


@dataclass(frozen=True, kw_only=True, init=False, eq=False)
class PreparedAction:
    # eq=False: identity, not structure, decides admission (a copy is refused).
    """Validated input with its resolved target; single-use, and only for its registry."""

    tool: RegisteredTool
    input: BaseModel
    """The parsed input model."""
    target: str | None
    """The resolved, trimmed action target, when the policy has one."""
    _canonical: list[dict[str, Any]] = dataclasses.field(default_factory=list, repr=False)
    _shown: list[dict[str, Any]] = dataclasses.field(default_factory=list, repr=False)

    def __init__(
        self,
        *,
        tool: RegisteredTool,
        input: BaseModel,
        target: str | None,
        _canonical: list[dict[str, Any]] | None = None,
        _shown: list[dict[str, Any]] | None = None,
    ) -> None:
        """Set every field in one call (``charter._frozen``: built once per call)."""
        set_fields(
            self,
            {
                "tool": tool,
                "input": input,
                "target": target,
                "_canonical": [] if _canonical is None else _canonical,
                "_shown": [] if _shown is None else _shown,
            },
        )

    @property
    def canonical_input(self) -> dict[str, Any]:
        """Every validated value in canonical form, secrets in clear: what fingerprints hash.

        Never show, log or store it; `arguments` is the shown form. Built on first use
        (a call without an action policy never needs it), from the model, not a dump.

        Raises:
            NonCanonicalValueError: A value has no canonical form.
        """
        if not self._canonical:
            self._canonical.append(canonical_input(self.input))
        return self._canonical[0]

    @property
    def arguments(self) -> dict[str, Any]:
        """The validated input as an approver is shown it: `canonical_input`, secrets masked.

        Each secret is ``{"$secret": "bound"}``: it is in the fingerprint but never shown.

        Raises:
            NonCanonicalValueError: A value has no canonical form.
        """
        if not self._shown:
            self._shown.append(shown_input(self.input))
        return self._shown[0]
