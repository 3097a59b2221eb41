"""Claims to a principal: the ``ClaimsMapper`` shape and the default ``ClaimMapping``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, get_args

from ..auth import Principal, PrincipalKind, holds_control_character
from ..errors import ConfigurationError
from ._rejections import reject

__all__ = ("ClaimMapping", "ClaimsMapper")

ClaimsMapper: TypeAlias = Callable[[Mapping[str, Any]], Principal | Awaitable[Principal]]
"""Turns a verified token's claims (read-only) into the caller's principal, sync or async.

Raise ``AuthenticationFailed`` (or ``TokenRejected``) to refuse the token; a ``ValueError``
or ``TypeError`` is refused as ``invalid_claim``. Usage: ``claims_to_principal=my_mapper``.
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimMapping:
    """The default ``ClaimsMapper``: which claims make the principal.

    ``sub`` is the subject. The tenant claim is required. Scopes are read from each scope
    claim: a string is split on spaces (OAuth 2 ``scope``, RFC 8693; Azure's ``scp``), a
    list is taken as it is (Okta's ``scp``); entries that are not valid charter scopes are
    dropped, never fixed up.
    """

    tenant_claim: str = "tenant_id"
    """The claim holding the caller's tenant; a token without it is refused."""

    scope_claims: tuple[str, ...] = ("scope", "scp")
    """The claims granting scopes; their scopes are combined."""

    actor_claim: str | None = None
    """The claim holding the caller's audience (``Principal.actor``); when set, a token
    without it is refused. None gives every caller ``actor``."""

    actor: str = "staff"
    """The audience of every caller when ``actor_claim`` is None."""

    kind: PrincipalKind = "person"
    """The principal kind of every caller when ``kind_claim`` is None. Only a ``person``
    may decide approvals."""

    kind_claim: str | None = None
    """The claim naming the caller's kind (``person``, ``agent`` or ``service``), e.g. for an
    identity provider that issues tokens to agents. When set, a token without it is
    refused (``missing_claim``): a machine token that leaves it out must not pass for a
    person. Any other value refuses the token too."""

    display_name_claim: str | None = "name"
    """The claim shown as the principal's display name, when it is a non-blank string."""

    def __post_init__(self) -> None:
        if isinstance(self.scope_claims, str):
            raise ConfigurationError(
                "ClaimMapping.scope_claims must be a list of claim names, "
                f"not the string {self.scope_claims!r}"
            )
        object.__setattr__(self, "scope_claims", tuple(self.scope_claims))
        for name in (self.tenant_claim, *self.scope_claims):
            if not isinstance(name, str) or not name:
                raise ConfigurationError("ClaimMapping claim names must be non-empty strings")
        if self.kind not in get_args(PrincipalKind):
            raise ConfigurationError(
                f"ClaimMapping.kind {self.kind!r} must be one of {get_args(PrincipalKind)}"
            )

    def __call__(self, claims: Mapping[str, Any]) -> Principal:
        """Build the principal from verified claims.

        Raises:
            TokenRejected: The tenant, actor or kind claim is missing (``missing_claim``), a
                claim is not a string or is blank or padded (``invalid_claim``), or the
                subject, tenant or actor holds a control character (``malformed``).
        """
        tenant = _string_claim(claims, self.tenant_claim)
        actor = self.actor if self.actor_claim is None else _string_claim(claims, self.actor_claim)
        scopes = [entry for name in self.scope_claims for entry in _scope_entries(claims.get(name))]
        name = claims.get(self.display_name_claim) if self.display_name_claim else None
        kind = self.kind
        if self.kind_claim is not None:
            if self.kind_claim not in claims:
                raise reject("missing_claim", f"the token has no '{self.kind_claim}' claim")
            claimed = claims[self.kind_claim]
            if claimed not in get_args(PrincipalKind):
                raise reject(
                    "invalid_claim",
                    f"the {self.kind_claim!r} claim must be one of {get_args(PrincipalKind)}",
                )
            kind = claimed
        for what, value in (("subject", claims.get("sub")), ("tenant", tenant), ("actor", actor)):
            if isinstance(value, str) and holds_control_character(value):
                raise reject("malformed", f"the token's {what} holds a control character")
        try:
            return Principal.from_claims(
                subject=claims["sub"],
                tenant_id=tenant,
                scopes=scopes,
                kind=kind,
                actor=actor,
                display_name=name if isinstance(name, str) and name.strip() else None,
            )
        except (KeyError, TypeError, ValueError):
            raise reject(
                "invalid_claim", "the token's subject, tenant or actor is blank or padded"
            ) from None


def _string_claim(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if value is None:
        raise reject("missing_claim", f"the token has no '{name}' claim")
    if not isinstance(value, str):
        raise reject("invalid_claim", f"the token's '{name}' claim is not a string")
    return value


def _scope_entries(value: object) -> list[object]:
    if isinstance(value, str):
        # RFC 6749 3.3: scope tokens are separated by spaces (%x20), nothing else.
        return [entry for entry in value.split(" ") if entry]
    if isinstance(value, list | tuple):
        return list(value)
    return []
