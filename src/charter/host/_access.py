"""Who may call a tool: audience, auth mode, required scopes and actor types.

The decisions themselves are ``charter.auth``'s pure functions; this module applies them
to a registered tool and a caller, and words the refusals.
"""

from __future__ import annotations

from ..auth import (
    AccessCatalog,
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

__all__ = ("ScopeChecks", "caller_audience", "visible")

_CACHE_SIZE = 4096
"""How many scope decisions are remembered (distinct scope sets times tools)."""


class ScopeChecks:
    """Decides whether callers may call tools, remembering each scope decision.

    ``missing_scopes`` is a pure function of (the principal's scopes, the tool's required
    scopes, the catalog, the admin scope), all immutable, so a remembered answer is the
    answer. The memory is bounded: past ``_CACHE_SIZE`` decisions it starts again.
    """

    def __init__(self, *, catalog: AccessCatalog | None, admin_scope: str) -> None:
        """Decide with ``catalog`` and ``admin_scope``."""
        self.catalog = catalog
        self.admin_scope = admin_scope
        self._checks: dict[tuple[frozenset[str], tuple[str, ...]], ScopeCheck] = {}

    def scopes(self, principal: Principal, registered: RegisteredTool) -> ScopeCheck:
        """``missing_scopes`` for this caller and tool."""
        key = (principal.scopes, registered.required_scopes)
        check = self._checks.get(key)
        if check is None:
            check = missing_scopes(
                principal.scopes,
                registered.required_scopes,
                self.catalog,
                admin_scope=self.admin_scope,
            )
            if len(self._checks) >= _CACHE_SIZE:
                self._checks.clear()
            self._checks[key] = check
        return check

    def allows(self, registered: RegisteredTool, principal: Principal | None) -> bool:
        """Whether ``principal`` passes the tool's auth mode and scopes (for discovery)."""
        tool = registered.tool
        if not check_auth_mode(tool.auth, principal, admin_scope=self.admin_scope).ok:
            return False
        if tool.auth == "public" or principal is None:
            return True
        return self.scopes(principal, registered).allowed

    def refusal(
        self, registered: RegisteredTool, principal: Principal | None, trace: Trace
    ) -> Failed | None:
        """Why ``principal`` may not call the tool (auth mode, scopes, actor type), or None.

        Records on ``trace`` whether the admin scope was needed.
        """
        tool = registered.tool
        decision = check_auth_mode(tool.auth, principal, admin_scope=self.admin_scope)
        if not decision.ok:
            if decision.code == "UNAUTHENTICATED":
                return failed(
                    ErrorCode.UNAUTHENTICATED,
                    f"Tool {registered.name!r} requires an authenticated caller.",
                    reason=decision.reason,
                )
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"Tool {registered.name!r} requires the admin scope.",
                reason=decision.reason,
                required=[self.admin_scope],
                missing=[self.admin_scope],
            )
        trace.admin_used = decision.admin_used
        if tool.auth != "public" and principal is not None:
            check = self.scopes(principal, registered)
            if not check.allowed:
                return failed(
                    ErrorCode.AUTHORIZATION_DENIED,
                    f"Tool {registered.name!r} needs scopes the caller lacks: "
                    f"{', '.join(check.missing)}.",
                    reason="insufficient_scope",
                    required=list(registered.required_scopes),
                    granted=sorted(principal.scopes),
                    missing=list(check.missing),
                )
            trace.admin_used = trace.admin_used or check.admin_used
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


def visible(registered: RegisteredTool, audience: str | None) -> bool:
    """Whether a tool is visible to ``audience`` (a tool without an audience list is public)."""
    allowed = registered.tool.audience
    if not allowed:
        return True
    return audience is not None and audience_allows(allowed, audience)
