"""Authentication and authorization decisions: pure functions, no I/O.

The host calls these in its pipeline (see ``docs/auth.md``): the ``Authenticator`` turns
credentials into a ``Principal``; ``check_auth_mode`` and ``missing_scopes`` decide whether
that principal may call a tool; ``resolve_tenant`` decides which tenant the call acts on.
Nothing here reads a clock, a database or the network, and nothing here logs: auditing
each use of the admin scope is the host's job, driven by the ``admin_used`` and
``delegated`` flags these functions return.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol, TypeAlias, get_args, runtime_checkable
from urllib.parse import unquote

from charter.errors import CharterError

__all__ = (
    "AccessCatalog",
    "AuthDecision",
    "AuthMode",
    "AuthenticationFailed",
    "AuthenticationUnavailable",
    "Authenticator",
    "Credentials",
    "Principal",
    "PrincipalKind",
    "ScopeCheck",
    "StaticAuthenticator",
    "TenantDecision",
    "audience_allows",
    "check_auth_mode",
    "enforce_audience",
    "has_permission",
    "is_valid_scope",
    "js_trim",
    "missing_scopes",
    "parse_scopes",
    "principal_key",
    "resolve_acting_user_id",
    "resolve_tenant",
    "split_principal_key",
    "validate_required_scope",
)

PrincipalKind: TypeAlias = Literal["person", "agent", "service"]
"""What kind of caller a principal is: a person, an AI agent, or a service (a workflow,
a scheduler, another system). Only a person may decide approvals; kinds grant nothing
else."""

AuthMode: TypeAlias = Literal["identity", "admin", "public"]
"""How a tool authenticates: ``identity`` needs a principal, ``admin`` the admin scope,
``public`` nothing."""

_PRINCIPAL_KINDS: frozenset[str] = frozenset(get_args(PrincipalKind))

# JavaScript's String.prototype.trim strips WhiteSpace and LineTerminator code points.
# Python's str.strip() differs: it also strips U+001C..U+001F and U+0085, and keeps
# U+FEFF. Checked against Node 20 over every code point.
_JS_WHITESPACE = (
    "\t\n\v\f\r \xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)

# Explicit ASCII classes (no \w, no re.IGNORECASE) so no Unicode look-alike can match.
_NAME = r"[a-z][a-z0-9_.-]*"
_PART = rf"(?:\*|{_NAME})"
_SCOPE = re.compile(rf"\*|{_NAME}|{_PART}:{_PART}")
_REQUIRED = re.compile(rf"({_NAME}):({_NAME})")
_BARE_NAME = re.compile(_NAME)


def js_trim(value: str) -> str:
    """Strip leading and trailing whitespace exactly as JavaScript's ``String.prototype.trim``.

    Args:
        value: The string to trim.

    Returns:
        ``value`` without the JavaScript whitespace and line terminators at either end.
        Unlike ``str.strip()``, U+FEFF is stripped and U+001C..U+001F and U+0085 are kept.
    """
    return value.strip(_JS_WHITESPACE)


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


# --- Principals and auth modes ----------------------------------------------------------


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


def _require_identifier(owner: str, name: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{owner}.{name} must be a str, got {type(value).__name__}")
    if not js_trim(value):
        raise ValueError(f"{owner}.{name} must not be blank")
    if js_trim(value) != value:
        raise ValueError(f"{owner}.{name} {value!r} must not start or end with whitespace")


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


@dataclass(frozen=True, kw_only=True, slots=True)
class AuthDecision:
    """Whether a principal passes a tool's auth mode, and why not."""

    ok: bool
    """True when the call may proceed to the scope check."""

    code: Literal["UNAUTHENTICATED", "AUTHORIZATION_DENIED"] | None = None
    """The error code to answer with when ``ok`` is False."""

    reason: Literal["authentication_required", "admin_required"] | None = None
    """The finer cause, for ``meta["reason"]``."""

    admin_used: bool = False
    """True when the admin scope let the call through; the host audits it."""


def check_auth_mode(
    mode: AuthMode, principal: Principal | None, *, admin_scope: str | None = "admin"
) -> AuthDecision:
    """Apply a tool's auth mode to the caller.

    ``public`` lets anyone through; ``identity`` needs a principal; ``admin`` needs a
    principal holding exactly the admin scope.

    Args:
        mode: The tool's auth mode.
        principal: The authenticated caller, or None for an anonymous one.
        admin_scope: The admin scope; None means no principal passes ``admin``.

    Returns:
        The decision.

    Raises:
        ValueError: If ``mode`` is not an ``AuthMode``.
    """
    if mode == "public":
        return AuthDecision(ok=True)
    if mode not in ("identity", "admin"):
        raise ValueError(f"auth mode {mode!r} must be one of 'identity', 'admin', 'public'")
    if principal is None:
        return AuthDecision(ok=False, code="UNAUTHENTICATED", reason="authentication_required")
    if mode == "identity":
        return AuthDecision(ok=True)
    if admin_scope is not None and admin_scope in principal.scopes:
        return AuthDecision(ok=True, admin_used=True)
    return AuthDecision(ok=False, code="AUTHORIZATION_DENIED", reason="admin_required")


# --- Audience ---------------------------------------------------------------------------


def _audiences(allowed: Sequence[str] | None) -> Sequence[str]:
    if allowed is None:
        return ()
    if isinstance(allowed, str):
        # A str is a Sequence[str]: "staff" would otherwise allow "s", "t", "a", "f".
        raise TypeError(f"allowed audiences must be a list of audiences, not {allowed!r}")
    return allowed


def audience_allows(allowed: Sequence[str] | None, audience: str) -> bool:
    """Tell whether a tool with an audience list is visible to a caller's audience.

    Args:
        allowed: The tool's allowed audiences; None or empty means every audience.
        audience: The caller's audience (``Principal.actor``).

    Returns:
        True when ``allowed`` is None or empty, or contains ``audience``.

    Raises:
        TypeError: If ``allowed`` is a single string.
    """
    audiences = _audiences(allowed)
    return not audiences or audience in audiences


def enforce_audience(actor: str, allowed: Sequence[str] | None) -> bool:
    """Tell whether an actor may query the given audience pools (the original's rule).

    Staff may federate across pools; any other actor may query only its own pool. This is
    for tools that take the audiences to search as input, not for tool visibility (see
    ``audience_allows``).

    Args:
        actor: The caller's actor type.
        allowed: The audiences the call asks for.

    Returns:
        True when ``allowed`` is None or empty, ``actor`` is ``staff``, or ``allowed`` is
        exactly ``[actor]``.

    Raises:
        TypeError: If ``allowed`` is a single string.
    """
    audiences = _audiences(allowed)
    if not audiences or actor == "staff":
        return True
    return len(audiences) == 1 and audiences[0] == actor


# --- Tenancy and delegation -------------------------------------------------------------


def _requested_id(requested: object) -> str | None:
    """Return the trimmed requested id, or None when it is missing, blank or not a str."""
    if not isinstance(requested, str):
        return None
    trimmed = js_trim(str.__str__(requested))
    return trimmed or None


@dataclass(frozen=True, kw_only=True, slots=True)
class TenantDecision:
    """Which tenant a call acts on, and whether that is allowed."""

    tenant_id: str
    """The effective tenant. When ``denied``, the principal's own tenant, never the
    requested one."""

    delegated: bool = False
    """True when an admin acts for another tenant through a delegable tool; audit it."""

    denied: bool = False
    """True when the caller asked for another tenant and may not act for it."""

    reason: Literal["tenant_forbidden"] | None = None
    """``tenant_forbidden`` when denied."""


def resolve_tenant(
    *, principal: Principal, requested: object, delegable: bool, admin_scope: str | None = "admin"
) -> TenantDecision:
    """Decide the tenant a call acts on; a foreign tenant is delegated or denied, never re-pinned.

    A requested id counts only if it is a ``str``; it is trimmed with ``js_trim``. A
    missing, blank or non-string id, or the principal's own tenant, gives the principal's
    tenant. Any other id is honoured only when the tool is delegable and the principal
    holds exactly the admin scope; otherwise the call is denied with ``tenant_forbidden``.

    Args:
        principal: The authenticated caller.
        requested: The tenant named by the call (input field or controls), if any.
        delegable: Whether the tool allows delegation; only ``True`` enables it.
        admin_scope: The admin scope; None disables delegation.

    Returns:
        The decision.
    """
    own = principal.tenant_id
    wanted = _requested_id(requested)
    if wanted is None or wanted == own:
        return TenantDecision(tenant_id=own)
    if delegable is True and admin_scope is not None and admin_scope in principal.scopes:
        return TenantDecision(tenant_id=wanted, delegated=True)
    return TenantDecision(tenant_id=own, denied=True, reason="tenant_forbidden")


def resolve_acting_user_id(
    verified: str, requested: object, scopes: object, delegable: bool
) -> tuple[str, bool]:
    """Reproduce engram's ``resolveActingUserId``, which re-pins instead of denying.

    Kept as the reference for ``resolve_tenant``'s decision table; charter's host does not
    use it. Scopes are read as the original's caller did: a non-list claim is no scopes,
    non-string entries are ignored, and only the exact string ``admin`` counts.

    Args:
        verified: The verified user id.
        requested: The ``userId`` the input asked for.
        scopes: The raw scope claim.
        delegable: Whether the tool opts into delegation; only ``True`` enables it.

    Returns:
        ``(effective_user_id, delegated)``: the trimmed requested id and True when the tool
        is delegable, the requested id is non-blank and differs from ``verified``, and the
        scopes include ``admin``; otherwise ``verified`` and False.
    """
    wanted = _requested_id(requested)
    granted = (
        [str.__str__(s) for s in scopes if isinstance(s, str)]
        if isinstance(scopes, list | tuple | set | frozenset)
        else []
    )
    if delegable is True and wanted is not None and wanted != verified and "admin" in granted:
        return wanted, True
    return verified, False


# --- Authentication ---------------------------------------------------------------------


class AuthenticationFailed(CharterError):
    """Raised by an ``Authenticator`` when credentials were sent but are not valid.

    The host answers ``UNAUTHENTICATED``. Return None instead when no credentials were
    sent. Keep secrets out of the message: a transport may show it to the caller.
    """


class AuthenticationUnavailable(CharterError):
    """Raised when credentials could not be checked now: the key store or key server is down.

    Nothing ran and nothing was decided about the caller, so transports answer 503 with
    ``Retry-After`` (never 401, which would tell a client its valid credentials are bad).
    ``Host.authenticate`` raises it for a store that is unavailable or busy; an
    ``Authenticator`` may raise it itself (``charter.jwt`` does when the issuer's keys
    cannot be fetched).
    """

    def __init__(self, message: str, *, reason: str = "authentication_unavailable") -> None:
        super().__init__(message)
        self.reason = reason
        """A short machine-readable cause, e.g. ``store_unavailable`` or ``keys_unavailable``."""


def _empty_headers() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class Credentials:
    """What the transport received to authenticate the caller; secrets stay out of its repr."""

    bearer: str | None = None
    """The bearer token, without the ``Bearer`` prefix; None when none was sent."""

    api_key: str | None = None
    """The API key; None when none was sent."""

    headers: Mapping[str, str] = field(default_factory=_empty_headers, hash=False)
    """Request headers as the transport received them, for authenticators that need more;
    copied into a read-only mapping and left out of the hash."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    def __repr__(self) -> str:
        bearer = None if self.bearer is None else "<redacted>"
        api_key = None if self.api_key is None else "<redacted>"
        return f"Credentials(bearer={bearer}, api_key={api_key}, headers=<{len(self.headers)}>)"


@runtime_checkable
class Authenticator(Protocol):
    """Protocol: turns transport credentials into a principal."""

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        """Authenticate the caller.

        Args:
            credentials: What the transport received.

        Returns:
            The principal, or None when no credentials were sent (an anonymous caller).

        Raises:
            AuthenticationFailed: If credentials were sent but are not valid.
        """
        ...


def _digest(token: str) -> bytes:
    # Hashing first gives compare_digest equal-length inputs (no length leak) and
    # accepts any str, where compare_digest on str rejects non-ASCII.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class StaticAuthenticator:
    """An ``Authenticator`` over a fixed table of tokens, for tests, examples and stdio.

    A token is accepted as a bearer token or as an API key. Lookup compares the presented
    token with every entry in constant time, whatever the position of the match.
    """

    __slots__ = ("_table",)

    def __init__(self, tokens: Mapping[str, Principal]) -> None:
        """Build the authenticator.

        Args:
            tokens: Each accepted token and the principal it authenticates.

        Raises:
            ValueError: If a token is empty.
            TypeError: If a token is not a str or a value is not a ``Principal``.
        """
        table: list[tuple[bytes, Principal]] = []
        for token, principal in tokens.items():
            if not isinstance(token, str):
                raise TypeError("StaticAuthenticator tokens must be str")
            if not token:
                raise ValueError("StaticAuthenticator tokens must not be empty")
            if not isinstance(principal, Principal):
                raise TypeError("StaticAuthenticator maps each token to a Principal")
            table.append((_digest(token), principal))
        self._table = tuple(table)

    def __repr__(self) -> str:
        return f"StaticAuthenticator(<{len(self._table)} tokens>)"

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        """Look the presented bearer token or API key up in the table.

        Args:
            credentials: What the transport received.

        Returns:
            The token's principal, or None when neither a bearer token nor an API key was
            sent.

        Raises:
            AuthenticationFailed: If the token is unknown, or both a bearer token and an API
                key were sent.
        """
        presented = [c for c in (credentials.bearer, credentials.api_key) if c is not None]
        if not presented:
            return None
        if len(presented) > 1:
            raise AuthenticationFailed("send either a bearer token or an API key, not both")
        digest = _digest(presented[0])
        found: Principal | None = None
        for candidate, principal in self._table:
            # No early exit: every entry is compared, so timing does not reveal the match.
            if hmac.compare_digest(candidate, digest) and found is None:
                found = principal
        if found is None:
            raise AuthenticationFailed("the credentials are not valid")
        return found
