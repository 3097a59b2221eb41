"""Callers checked again before a change notification: a revoked credential hears nothing.

A change notification (``notifications/resources/updated`` to a subscribed session, an
event on a ``subscriptions/listen`` stream) goes out without a request, so no request
authenticates it. A subscription made with a credential (a bearer token or an API key,
read as every request's: ``_auth.request_credentials``) therefore keeps it, and
before the caller is told of a change the host's authenticator checks it again
(``host.authenticate``, as for every request):

- valid, as the same principal (home tenant and subject, ``Principal.key``): the caller is
  told, and the principal as authenticated now (its current scopes) decides what it may
  read;
- refused, anonymous, or another principal (a revoked API key, an expired JWT): the caller
  is told nothing, and its subscriptions end;
- not checkable now (``AuthenticationUnavailable``: the key store or the key server is
  down): the caller is told nothing this time, and its subscriptions stay, checked again
  at the next notification. An unchecked credential is never trusted, and an outage does
  not end every subscription a server holds.

A valid credential is trusted for ``RECHECK_SECONDS`` before it is checked again, so a
burst of changes costs one check per caller (plus what the authenticator remembers
itself: the API-key authenticator remembers a verified key for 5 s). Subscriptions made
without a credential (stdio, in memory, anonymous callers) have nothing to check and
are told as before.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from mcp.server.context import ServerRequestContext

from ..auth import AuthenticationFailed, AuthenticationUnavailable, Credentials, Principal
from ..host import Host
from ._auth import request_credentials

__all__ = ("RECHECK_SECONDS", "Caller", "Standing", "caller_of")

logger = logging.getLogger("charter.mcp")

RECHECK_SECONDS = 1.0
"""How long a caller's credential, once found valid, is trusted before it is checked again."""


class Standing(enum.Enum):
    """What a subscribed caller's credential says now."""

    VALID = "valid"
    """Still valid: tell the caller, as ``Caller.principal``."""
    REVOKED = "revoked"
    """Refused, anonymous now, or another principal: tell it nothing, end its subscriptions."""
    UNCHECKED = "unchecked"
    """It could not be checked now: tell the caller nothing this time, keep its subscriptions."""


@dataclass(kw_only=True, slots=True)
class Caller:
    """Who made a subscription, and the credential it was made with (never shown in a repr)."""

    principal: Principal | None
    """The caller as last authenticated: by the subscribing request, then by each check."""
    credentials: Credentials | None = field(default=None, repr=False)
    """The credentials the subscription was made with; None when it was made without any."""
    checked_at: float | None = field(default=None, repr=False)
    """When the credential was last found valid (``time.monotonic``); None: not since then."""
    revoked: bool = False
    """The credential was refused once: it is never checked, nor trusted, again."""

    async def standing(self, host: Host) -> Standing:
        """Check the credential again with ``host``'s authenticator, unless checked just now.

        A valid credential updates ``principal`` (the same principal, its scopes as they
        are now).
        """
        if self.revoked:
            return Standing.REVOKED
        if self.credentials is None:
            return Standing.VALID  # nothing to check: stdio, in memory, anonymous
        now = time.monotonic()
        if self.checked_at is not None and now - self.checked_at < RECHECK_SECONDS:
            return Standing.VALID
        try:
            fresh = await host.authenticate(self.credentials)
        except AuthenticationFailed:
            fresh = None
        except AuthenticationUnavailable:
            return Standing.UNCHECKED
        except Exception as exc:
            # An authenticator's bug: nothing is sent on a credential that was not checked.
            # Its type only: an exception's text might quote the credential.
            logger.warning(
                "a subscriber's credential could not be checked: %s", type(exc).__qualname__
            )
            return Standing.UNCHECKED
        if fresh is None or self.principal is None or fresh.key != self.principal.key:
            self.revoked = True
            return Standing.REVOKED
        self.principal = fresh
        self.checked_at = now
        return Standing.VALID


def caller_of(ctx: ServerRequestContext[Any, Any], principal: Principal | None) -> Caller:
    """The caller of a subscribing request: its principal and, over HTTP, its credentials.

    Only credentials that authenticated someone are kept: an anonymous caller has nothing
    to lose, and stdio and in-memory connections send none.
    """
    scope = getattr(ctx.request, "scope", None)
    credentials: Credentials | None = None
    if principal is not None and isinstance(scope, dict):
        credentials = request_credentials(scope)
    return Caller(principal=principal, credentials=credentials)
