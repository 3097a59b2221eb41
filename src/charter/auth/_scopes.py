"""Scopes: the grammar of a granted or required scope, and matching grants against requirements."""

from __future__ import annotations

import re
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

__all__ = (
    "AccessCatalog",
    "ScopeCheck",
    "has_permission",
    "is_valid_scope",
    "missing_scopes",
    "parse_scopes",
    "validate_required_scope",
)

# Explicit ASCII classes (no \w, no re.IGNORECASE) so no Unicode look-alike can match.
_NAME = r"[a-z][a-z0-9_.-]*"
_PART = rf"(?:\*|{_NAME})"
_SCOPE = re.compile(rf"\*|{_NAME}|{_PART}:{_PART}")
_REQUIRED = re.compile(rf"({_NAME}):({_NAME})")
_BARE_NAME = re.compile(_NAME)

# --- Scope grammar ----------------------------------------------------------------------


def is_valid_scope(s: str) -> bool:
    """Tell whether a string is a scope exactly as given, with no normalisation.

    A valid scope is ``*``, ``*:*``, a bare name, or ``resource:action`` where each part
    is ``*`` or matches ``[a-z][a-z0-9_.-]*`` (ASCII only).

    Args:
        s: The candidate scope.

    Returns:
        True when ``s`` is a ``str`` matching the grammar in full.
    """
    return isinstance(s, str) and _SCOPE.fullmatch(s) is not None


def parse_scopes(claim: object) -> frozenset[str]:
    r"""Read a raw scope claim into the set of valid scopes it grants.

    Only a list, tuple, set or frozenset counts as a claim; anything else (including a
    space-joined string such as ``"a b"`` or the string ``"admin"``) grants no scopes.
    Entries that are not strings, or are not valid exactly as given, are dropped and never
    fixed up: ``"Admin"``, ``"admin "`` and ``"admin\u200b"`` grant nothing.

    Args:
        claim: The scope claim as the credential carried it.

    Returns:
        The valid scopes, de-duplicated.
    """
    if not isinstance(claim, list | tuple | set | frozenset):
        return frozenset()
    scopes: set[str] = set()
    for entry in claim:
        if not isinstance(entry, str):
            continue
        # A str subclass may override __eq__ or __hash__; keep a plain str copy.
        plain = str.__str__(entry)
        if is_valid_scope(plain):
            scopes.add(plain)
    return frozenset(scopes)


def validate_required_scope(s: str) -> str:
    """Check a scope a tool requires: ``resource:action`` with no wildcard.

    Args:
        s: The scope from a tool definition.

    Returns:
        ``s`` unchanged.

    Raises:
        ValueError: If ``s`` is not a ``resource:action`` pair of names.
    """
    if not isinstance(s, str) or _REQUIRED.fullmatch(s) is None:
        raise ValueError(
            f"required scope {s!r} must be 'resource:action' where each part matches "
            "[a-z][a-z0-9_.-]* (lower-case ASCII, no '*' wildcard), e.g. 'trips:write'"
        )
    return s


# --- Scope checks -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class AccessCatalog:
    """Scopes that the wildcard grants do not satisfy (high-impact actions, PII resources)."""

    explicit_actions: frozenset[str] = frozenset()
    """Action names (``send``) or pairs (``notifications:send``) that only the exact
    ``resource:action`` grant satisfies; ``*``, ``*:*``, ``resource:*`` and ``*:action``
    do not."""

    explicit_resources: frozenset[str] = frozenset()
    """Resources (``bookings-pii``) that only ``resource:*`` or ``resource:action`` grants
    satisfy; the global ``*``, ``*:*`` and ``*:action`` do not."""

    def __post_init__(self) -> None:
        for name in ("explicit_actions", "explicit_resources"):
            entries = getattr(self, name)
            if isinstance(entries, str) or not isinstance(entries, AbstractSet):
                raise TypeError(f"AccessCatalog.{name} must be a frozenset of strings")
            object.__setattr__(self, name, frozenset(entries))
        for action in self.explicit_actions:
            if not _is_name(action) and not _is_required_pair(action):
                raise ValueError(
                    f"AccessCatalog.explicit_actions entry {action!r} must be an action name "
                    "or a 'resource:action' pair, lower-case ASCII, without wildcards"
                )
        for resource in self.explicit_resources:
            if not _is_name(resource):
                raise ValueError(
                    f"AccessCatalog.explicit_resources entry {resource!r} must be a resource "
                    "name, lower-case ASCII, without wildcards"
                )


def _is_name(value: object) -> bool:
    return isinstance(value, str) and _BARE_NAME.fullmatch(value) is not None


def _is_required_pair(value: object) -> bool:
    return isinstance(value, str) and _REQUIRED.fullmatch(value) is not None


def has_permission(
    granted: AbstractSet[str], required: str, catalog: AccessCatalog | None = None
) -> bool:
    """Tell whether granted scopes satisfy one required ``resource:action`` scope.

    Without a catalog any of ``*``, ``*:*``, ``resource:*``, ``*:action`` or the exact
    scope satisfies it. The catalog narrows this (see ``AccessCatalog``). The admin scope
    is not considered here; ``missing_scopes`` applies it. Grants are compared as exact
    strings, so a malformed grant matches nothing.

    Args:
        granted: The principal's scopes.
        required: The scope to check.
        catalog: Scopes that wildcards do not satisfy, if any.

    Returns:
        True when the scope is satisfied. A ``required`` that is not a ``resource:action``
        pair of names is never satisfied (fails closed).
    """
    match = _REQUIRED.fullmatch(required) if isinstance(required, str) else None
    if match is None:
        return False
    resource, action = match.group(1), match.group(2)
    if catalog is not None:
        if action in catalog.explicit_actions or required in catalog.explicit_actions:
            return required in granted
        if resource in catalog.explicit_resources:
            return required in granted or f"{resource}:*" in granted
    return any(grant in granted for grant in ("*", "*:*", f"{resource}:*", f"*:{action}", required))


@dataclass(frozen=True, kw_only=True, slots=True)
class ScopeCheck:
    """The result of checking a tool's required scopes against a principal's."""

    missing: tuple[str, ...]
    """Required scopes not satisfied, in the order they were required, without repeats."""

    admin_used: bool
    """True when some required scope was satisfied only because the admin scope was
    granted; the host audits such calls."""

    @property
    def allowed(self) -> bool:
        """True when no required scope is missing."""
        return not self.missing


def missing_scopes(
    granted: AbstractSet[str],
    required: Iterable[str],
    catalog: AccessCatalog | None = None,
    *,
    admin_scope: str | None = "admin",
) -> ScopeCheck:
    """Check every required scope (AND) against the granted scopes.

    The admin scope, compared as an exact string, satisfies every scope check, including
    scopes the catalog marks explicit. ``admin:*`` or ``*`` are not the admin scope.
    An empty requirement is always allowed.

    Args:
        granted: The principal's scopes.
        required: The tool's required scopes, all of which must be satisfied.
        catalog: Scopes that wildcards do not satisfy, if any.
        admin_scope: The scope that satisfies every check; None disables it.

    Returns:
        The missing scopes and whether the admin scope was needed.

    Raises:
        TypeError: If ``required`` is a single string rather than a collection of scopes.
    """
    if isinstance(required, str):
        raise TypeError(f"required must be a collection of scopes, not the string {required!r}")
    missing: list[str] = []
    for scope in required:
        if scope not in missing and not has_permission(granted, scope, catalog):
            missing.append(scope)
    if admin_scope is not None and admin_scope in granted:
        return ScopeCheck(missing=(), admin_used=bool(missing))
    return ScopeCheck(missing=tuple(missing), admin_used=False)
