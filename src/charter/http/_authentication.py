"""Who is calling a REST route: Starlette's ``AuthenticationMiddleware`` over the host.

Every ``/v1`` route sits behind one middleware that reads the credentials, asks
``Host.authenticate`` and puts the caller on the request (``request.user``), or answers
the problem itself: 400 for ambiguous credentials, 401 for bad ones, 503 when they cannot
be checked now. It runs before the route, so no body is read for a caller refused here.
Routes read the caller with ``caller_of`` and never repeat the checks. The call route
(``CallEndpoint``, most of the traffic) is a plain ASGI app that calls the same
``_request.authenticate`` itself first, with the same answers.
"""

from __future__ import annotations

from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
)
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

from charter.auth import Principal
from charter.host import Host

from ._request import authenticate, authentication_required

__all__ = ("Caller", "authentication", "caller_of", "required_caller")


class Caller(BaseUser):
    """The authenticated principal, as Starlette's ``request.user``."""

    def __init__(self, principal: Principal) -> None:
        """Wrap ``principal``."""
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        """Always: anonymous requests get Starlette's ``UnauthenticatedUser``."""
        return True

    @property
    def display_name(self) -> str:
        """The principal's display name, else its subject."""
        return self.principal.display_name or self.principal.subject


class _Refused(AuthenticationError):
    """Carries the problem to answer for credentials that were refused."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


class _HostCredentials(AuthenticationBackend):
    """Authenticates with the host: ``Host.authenticate`` decides, nothing else."""

    def __init__(self, host: Host) -> None:
        self.host = host

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        caller = await authenticate(self.host, conn.scope)
        if isinstance(caller, Response):
            raise _Refused(caller)
        if caller is None:
            return None
        return AuthCredentials(sorted(caller.scopes)), Caller(caller)


def _refusal(conn: HTTPConnection, exc: AuthenticationError) -> Response:
    assert isinstance(exc, _Refused)
    return exc.response


def authentication(host: Host) -> Middleware:
    """The middleware that authenticates a route's callers against ``host``."""
    return Middleware(AuthenticationMiddleware, backend=_HostCredentials(host), on_error=_refusal)


def caller_of(request: Request) -> Principal | None:
    """The request's caller, authenticated by the middleware (None when anonymous)."""
    user = request.user
    return user.principal if isinstance(user, Caller) else None


def required_caller(request: Request) -> Principal | Response:
    """The request's caller, or the 401 for a route that needs one."""
    caller = caller_of(request)
    return caller if caller is not None else authentication_required()
