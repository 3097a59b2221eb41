"""The errors of authentication: credentials that are not valid, or cannot be checked now."""

from __future__ import annotations

from ..errors import CharterError

__all__ = ("AuthenticationFailed", "AuthenticationUnavailable")


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
