"""Auth modes: whether a tool needs an identity, the admin scope, or nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._principal import Principal

__all__ = ("AuthDecision", "AuthMode", "check_auth_mode")

AuthMode: TypeAlias = Literal["identity", "admin", "public"]
"""How a tool authenticates: ``identity`` needs a principal, ``admin`` the admin scope,
``public`` nothing."""


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


# Frozen, so the answers every call gets are made once.
_PASSED = AuthDecision(ok=True)
_PASSED_AS_ADMIN = AuthDecision(ok=True, admin_used=True)
_NO_IDENTITY = AuthDecision(ok=False, code="UNAUTHENTICATED", reason="authentication_required")
_NOT_ADMIN = AuthDecision(ok=False, code="AUTHORIZATION_DENIED", reason="admin_required")


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
        return _PASSED
    if mode not in ("identity", "admin"):
        raise ValueError(f"auth mode {mode!r} must be one of 'identity', 'admin', 'public'")
    if principal is None:
        return _NO_IDENTITY
    if mode == "identity":
        return _PASSED
    if admin_scope is not None and admin_scope in principal.scopes:
        return _PASSED_AS_ADMIN
    return _NOT_ADMIN
