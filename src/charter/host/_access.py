"""Who may use a tool, resource or prompt: audience, auth mode, required scopes, actor types.

The decisions themselves are ``charter.auth``'s pure functions; this module applies them
to a caller and what it asks for (a registered tool, or a resource's or prompt's
``Access``), and words the refusals, the same for all three.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..auth import (
    AccessCatalog,
    AuthMode,
    Principal,
    ScopeCheck,
    audience_allows,
    check_auth_mode,
    enforce_audience,
    missing_scopes,
)
from ..errors import ErrorCode
from ..manifest import RegisteredTool
from ..outcome import Failed, failed
from ._trace import Trace

__all__ = ("Admitted", "ScopeChecks", "audience_visible", "caller_audience", "visible")

_CACHE_SIZE = 4096
"""How many scope decisions are remembered (distinct scope sets times required sets)."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """The caller passed the auth mode and the scopes."""

    admin_used: bool
    """Whether only the admin scope let it through (the host audits such calls)."""


_ADMITTED = Admitted(admin_used=False)
_ADMITTED_AS_ADMIN = Admitted(admin_used=True)


class ScopeChecks:
    """Decides whether callers may use tools, resources and prompts; remembers scope decisions.

    ``missing_scopes`` is a pure function of (the principal's scopes, the required
    scopes, the catalog, the admin scope), all immutable, so a remembered answer is the
    answer. The memory is bounded: past ``_CACHE_SIZE`` decisions it starts again.
    """

    def __init__(self, *, catalog: AccessCatalog | None, admin_scope: str) -> None:
        """Decide with ``catalog`` and ``admin_scope``."""
        self.catalog = catalog
        self.admin_scope = admin_scope
        self._checks: dict[tuple[frozenset[str], tuple[str, ...]], ScopeCheck] = {}

    def scopes(self, principal: Principal, required: tuple[str, ...]) -> ScopeCheck:
        """``missing_scopes`` for this caller and these required scopes."""
        key = (principal.scopes, required)
        check = self._checks.get(key)
        if check is None:
            check = missing_scopes(
                principal.scopes, required, self.catalog, admin_scope=self.admin_scope
            )
            if len(self._checks) >= _CACHE_SIZE:
                self._checks.clear()
            self._checks[key] = check
        return check

    def allows(
        self, auth: AuthMode, required: tuple[str, ...], principal: Principal | None
    ) -> bool:
        """Whether ``principal`` passes an auth mode and required scopes (for listings)."""
        if not check_auth_mode(auth, principal, admin_scope=self.admin_scope).ok:
            return False
        if auth == "public" or principal is None:
            return True
        return self.scopes(principal, required).allowed

    def admit(
        self,
        kind: str,
        name: str,
        auth: AuthMode,
        required: tuple[str, ...],
        principal: Principal | None,
    ) -> Admitted | Failed:
        """Whether ``principal`` may use the ``kind`` (Tool, Resource, Prompt) named ``name``.

        The refusal is ``UNAUTHENTICATED``, or ``AUTHORIZATION_DENIED`` whose meta names
        the ``required`` scopes, the ones ``granted`` and the ones ``missing``.
        """
        decision = check_auth_mode(auth, principal, admin_scope=self.admin_scope)
        if not decision.ok:
            if decision.code == "UNAUTHENTICATED":
                return failed(
                    ErrorCode.UNAUTHENTICATED,
                    f"{kind} {name!r} requires an authenticated caller.",
                    reason=decision.reason,
                )
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"{kind} {name!r} requires the admin scope.",
                reason=decision.reason,
                required=[self.admin_scope],
                missing=[self.admin_scope],
            )
        if auth == "public" or principal is None:
            return _ADMITTED_AS_ADMIN if decision.admin_used else _ADMITTED
        check = self.scopes(principal, required)
        if not check.allowed:
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"{kind} {name!r} needs scopes the caller lacks: {', '.join(check.missing)}.",
                reason="insufficient_scope",
                required=list(required),
                granted=sorted(principal.scopes),
                missing=list(check.missing),
            )
        return _ADMITTED_AS_ADMIN if decision.admin_used or check.admin_used else _ADMITTED

    def tool_allows(self, registered: RegisteredTool, principal: Principal | None) -> bool:
        """Whether ``principal`` passes the tool's auth mode and scopes (for discovery)."""
        return self.allows(registered.tool.auth, registered.required_scopes, principal)

    def refusal(
        self, registered: RegisteredTool, principal: Principal | None, trace: Trace
    ) -> Failed | None:
        """Why ``principal`` may not call the tool (auth mode, scopes, actor type), or None.

        Records on ``trace`` whether the admin scope was needed.
        """
        admitted = self.admit(
            "Tool", registered.name, registered.tool.auth, registered.required_scopes, principal
        )
        if isinstance(admitted, Failed):
            return admitted
        trace.admin_used = admitted.admin_used
        return _actor_refusal(registered, principal)


def _actor_refusal(registered: RegisteredTool, principal: Principal | None) -> Failed | None:
    policy = registered.action_policy
    if policy is None or not policy.allowed_actor_types:
        return None
    actor = principal.actor if principal is not None else None
    if actor in policy.allowed_actor_types:
        return None
    return failed(
        ErrorCode.AUTHORIZATION_DENIED,
        f"Tool {registered.name!r} is not for {actor or 'anonymous'} callers.",
        reason="actor_not_allowed",
        allowed=list(policy.allowed_actor_types),
    )


def caller_audience(principal: Principal | None, requested: str | None) -> str | None:
    """The audience a call is made for.

    The transport's audience counts when the principal may query it (``enforce_audience``:
    staff may use any audience, anyone else only its own); otherwise, and when the
    transport names none, the principal's own actor type. Anonymous callers get the
    transport's audience as is.
    """
    if principal is None:
        return requested
    if requested is not None and enforce_audience(principal.actor, [requested]):
        return requested
    return principal.actor


def audience_visible(allowed: tuple[str, ...] | None, audience: str | None) -> bool:
    """Whether what is limited to ``allowed`` audiences is visible to ``audience`` (none: all)."""
    if not allowed:
        return True
    return audience is not None and audience_allows(allowed, audience)


def visible(registered: RegisteredTool, audience: str | None) -> bool:
    """Whether a tool is visible to ``audience`` (a tool without an audience list is public)."""
    return audience_visible(registered.tool.audience, audience)
