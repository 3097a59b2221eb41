"""Authentication and authorization decisions: pure functions, no I/O.

The host calls these in its pipeline (see ``docs/auth.md``): the ``Authenticator`` turns
credentials into a ``Principal``; ``check_auth_mode`` and ``missing_scopes`` decide whether
that principal may call a tool; ``resolve_tenant`` decides which tenant the call acts on.
Nothing here reads a clock, a database or the network, and nothing here logs: auditing
each use of the admin scope is the host's job, driven by the ``admin_used`` and
``delegated`` flags these functions return.

Import every name from ``charter.auth``; the modules behind it are private:

- ``_scopes``: the scope grammar (``is_valid_scope``, ``parse_scopes``,
  ``validate_required_scope``) and matching grants against requirements
  (``AccessCatalog``, ``has_permission``, ``missing_scopes``, ``ScopeCheck``).
- ``_principal``: the verified caller (``Principal``, ``PrincipalKind``), the characters
  no identity may hold (``holds_control_character``) and its stored key
  (``principal_key``, ``split_principal_key``).
- ``_modes``: a tool's auth mode (``AuthMode``, ``check_auth_mode``, ``AuthDecision``).
- ``_audience``: tool visibility by audience (``audience_allows``) and the original's
  audience-pool rule (``enforce_audience``).
- ``_tenancy``: the tenant a call acts on and delegation (``resolve_tenant``,
  ``TenantDecision``).
- ``_authenticators``: what a transport received (``Credentials``) and its one token
  (``presented_token``), the ``Authenticator`` protocol and the ``StaticAuthenticator``
  table.
- ``_errors``: ``AuthenticationFailed`` and ``AuthenticationUnavailable``.
- ``_trim``: ``js_trim``, JavaScript's trim, applied to ids as the original did.
"""

from __future__ import annotations

from ._audience import audience_allows as audience_allows
from ._audience import enforce_audience as enforce_audience
from ._authenticators import Authenticator as Authenticator
from ._authenticators import Credentials as Credentials
from ._authenticators import StaticAuthenticator as StaticAuthenticator
from ._authenticators import presented_token as presented_token
from ._errors import AuthenticationFailed as AuthenticationFailed
from ._errors import AuthenticationUnavailable as AuthenticationUnavailable
from ._modes import AuthDecision as AuthDecision
from ._modes import AuthMode as AuthMode
from ._modes import check_auth_mode as check_auth_mode
from ._principal import IDENTITY_PATTERN as IDENTITY_PATTERN
from ._principal import Principal as Principal
from ._principal import PrincipalKind as PrincipalKind
from ._principal import holds_control_character as holds_control_character
from ._principal import principal_key as principal_key
from ._principal import split_principal_key as split_principal_key
from ._scopes import AccessCatalog as AccessCatalog
from ._scopes import ScopeCheck as ScopeCheck
from ._scopes import has_permission as has_permission
from ._scopes import is_valid_scope as is_valid_scope
from ._scopes import missing_scopes as missing_scopes
from ._scopes import parse_scopes as parse_scopes
from ._scopes import validate_required_scope as validate_required_scope
from ._tenancy import TenantDecision as TenantDecision
from ._tenancy import resolve_tenant as resolve_tenant
from ._trim import js_trim as js_trim

__all__ = (
    "IDENTITY_PATTERN",
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
    "holds_control_character",
    "is_valid_scope",
    "js_trim",
    "missing_scopes",
    "parse_scopes",
    "presented_token",
    "principal_key",
    "resolve_tenant",
    "split_principal_key",
    "validate_required_scope",
)
