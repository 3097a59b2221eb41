"""Principals: who a verified caller is, its kind, and the key it is stored and compared by."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal, TypeAlias, get_args
from urllib.parse import unquote

from ._scopes import is_valid_scope, parse_scopes
from ._trim import js_trim

__all__ = (
    "Principal",
    "PrincipalKind",
    "IDENTITY_PATTERN",
    "holds_control_character",
    "principal_key",
    "split_principal_key",
)

PrincipalKind: TypeAlias = Literal["person", "agent", "service"]
"""What kind of caller a principal is: a person, an AI agent, or a service (a workflow,
a scheduler, another system). Only a person may decide approvals; kinds grant nothing
else."""


_PRINCIPAL_KINDS: frozenset[str] = frozenset(get_args(PrincipalKind))


def principal_key(tenant_id: str, subject: str) -> str:
    """The stored identity of a principal: ``<home tenant>/<subject>``, unambiguous.

    The tenant's ``%`` and ``/`` are percent-escaped, so the first ``/`` always separates
    the two (``acme/ops-olga``; a tenant ``a/b`` gives ``a%2Fb/…``). Read one back with
    ``split_principal_key``.
    """
    return tenant_id.replace("%", "%25").replace("/", "%2F") + "/" + subject


def split_principal_key(key: str) -> tuple[str | None, str]:
    """The (home tenant, subject) of a ``principal_key``; (None, key) for any other string."""
    tenant, sep, subject = key.partition("/")
    if not sep:
        return None, key
    return unquote(tenant), subject


_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories no subject, tenant or actor may hold: controls (NUL, newline, ESC,
DEL, C1), format characters (bidi overrides, zero-width), lone surrogates, line and
paragraph separators. Each could forge a line of a log or an audit trail, or make two
identities that print alike."""


_CONTROL_CLASS = (
    r"\u0000-\u001f\u007f-\u009f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891"
    r"\u08e2\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    r"\ufff9-\ufffb"
)
"""The characters of ``_CONTROL_CATEGORIES`` in the Basic Multilingual Plane but the
surrogates, as a regular-expression class body (tested against ``unicodedata``)."""

IDENTITY_PATTERN = rf"^[^{_CONTROL_CLASS}]*[^\s{_CONTROL_CLASS}][^{_CONTROL_CLASS}]*$"
"""A JSON Schema ``pattern`` for a string with a character that is not a space and none
``holds_control_character`` refuses. Portable (ECMA-262 and Python), so it leaves out what
no portable class can name: the dozen format characters past U+FFFF, and lone surrogates
(which a class would refuse, with every astral character, in ECMA-262 without its ``u``
flag; charter refuses them when it reads a body)."""


def holds_control_character(value: str) -> bool:
    """Whether ``value`` holds a character no identity may (see ``_CONTROL_CATEGORIES``)."""
    # isprintable() is one pass in C and true for nearly every identity; it is also false
    # for spaces other than U+0020 and for unassigned code points, which are allowed.
    return not value.isprintable() and any(
        unicodedata.category(char) in _CONTROL_CATEGORIES for char in value
    )


def _require_identifier(owner: str, name: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{owner}.{name} must be a str, got {type(value).__name__}")
    if not js_trim(value):
        raise ValueError(f"{owner}.{name} must not be blank")
    if js_trim(value) != value:
        raise ValueError(f"{owner}.{name} {value!r} must not start or end with whitespace")
    if holds_control_character(value):
        raise ValueError(f"{owner}.{name} {value!r} holds a control character")


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """A verified caller: who it is, which tenant it belongs to, and what it may do."""

    subject: str
    """Who the caller is: a user id, or the id of the agent, workflow or system."""

    tenant_id: str
    """The tenant the credentials belong to; every call acts on it unless delegated."""

    scopes: frozenset[str]
    """The granted scopes, already normalised: each one satisfies ``is_valid_scope``."""

    kind: PrincipalKind = "person"
    """What kind of caller this is. Only a ``person`` may decide approvals; an
    authenticator sets it from the credentials (API keys carry one, JWTs map a claim)."""

    actor: str = "staff"
    """The caller's audience (actor type): ``staff``, ``customer``, ``partner`` or
    ``supplier`` in the original system."""

    api_key_id: str | None = None
    """The id of the API key that authenticated the call, if one did; for audit."""

    display_name: str | None = None
    """A human-readable name for consoles and audit logs."""

    def __post_init__(self) -> None:
        _require_identifier("Principal", "subject", self.subject)
        _require_identifier("Principal", "tenant_id", self.tenant_id)
        _require_identifier("Principal", "actor", self.actor)
        if not isinstance(self.scopes, frozenset):
            raise TypeError(
                "Principal.scopes must be a frozenset of valid scopes; use "
                "Principal.from_claims(scopes=...) to read a raw claim"
            )
        invalid = sorted(repr(s) for s in self.scopes if not is_valid_scope(s))
        if invalid:
            raise ValueError(
                f"Principal.scopes holds invalid scopes {', '.join(invalid)}; use "
                "Principal.from_claims(scopes=...) to drop them"
            )
        if self.kind not in _PRINCIPAL_KINDS:
            raise ValueError(
                f"Principal.kind {self.kind!r} must be one of {sorted(_PRINCIPAL_KINDS)}"
            )

    @property
    def key(self) -> str:
        """Who this principal is, everywhere it is stored or compared: home tenant and subject.

        ``principal_key(tenant_id, subject)``; two tenants' principals with the same subject
        never share a key.
        """
        return principal_key(self.tenant_id, self.subject)

    @classmethod
    def from_claims(
        cls,
        *,
        subject: str,
        tenant_id: str,
        scopes: object,
        kind: PrincipalKind = "person",
        actor: str = "staff",
        api_key_id: str | None = None,
        display_name: str | None = None,
    ) -> Principal:
        """Build a principal from verified credential claims, reading scopes with ``parse_scopes``.

        Args:
            subject: Who the caller is.
            tenant_id: The tenant the credentials belong to.
            scopes: The raw scope claim; only a list, tuple or set of valid scopes counts.
            kind: What kind of caller this is.
            actor: The caller's audience.
            api_key_id: The authenticating API key's id, if any.
            display_name: A human-readable name.

        Returns:
            The principal.

        Raises:
            ValueError: If ``subject``, ``tenant_id`` or ``actor`` is blank or padded with
                whitespace, or ``kind`` is unknown.
        """
        return cls(
            subject=subject,
            tenant_id=tenant_id,
            scopes=parse_scopes(scopes),
            kind=kind,
            actor=actor,
            api_key_id=api_key_id,
            display_name=display_name,
        )
