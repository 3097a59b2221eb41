"""What every HTTP notifier shares: its URL, its routing (tenants, kinds) and the POST."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import TypeAlias, TypeVar
from urllib.parse import urlsplit

from .._numbers import is_positive_seconds
from ..errors import CharterError, ConfigurationError
from ..host._notices import ApprovalEvent, notifier_name_problem
from ..ledger.approvals import ApprovalChange

__all__ = ("HttpNotifier", "NotificationFailed")

SelectedT = TypeVar("SelectedT", bound=str)

Selection: TypeAlias = list[SelectedT] | tuple[SelectedT, ...] | AbstractSet[SelectedT]
"""A routing option's values (``tenants``, ``events``): a list, tuple or set, never one
string, which would otherwise read as the set of its characters."""

_KINDS: frozenset[str] = frozenset({"requested", "granted", "denied", "expired", "consumed"})


class NotificationFailed(CharterError):
    """Raised by a notifier's ``send`` when the receiver did not accept the event (retried)."""


class HttpNotifier:
    """A notifier that POSTs each event it wants to one URL."""

    kind = "http"
    """The name prefix (``webhook``, ``slack``)."""

    def __init__(
        self,
        url: str,
        *,
        tenants: Selection[str] | None = None,
        events: Selection[ApprovalChange] | None = None,
        name: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        """Send to ``url`` the events of ``tenants`` (all when None) of ``events`` kinds.

        Raises:
            ConfigurationError: the URL is not http(s); tenants or events is not a
                non-empty list of non-empty strings (one string is refused: it is not a
                list), or an event kind is unknown; the name is not a non-empty string;
                or the timeout is not a finite, positive number of seconds.
        """
        host = self._checked_url(url)
        self._url = url
        self.tenants = self._selection("tenants", tenants, "None means every tenant")
        self.events = self._selection("events", events, "None means all five kinds")
        unknown = sorted((self.events or frozenset()) - _KINDS)
        if unknown:
            raise ConfigurationError(
                f"{self.kind}: unknown event kinds {unknown}; use {sorted(_KINDS)}"
            )
        if not is_positive_seconds(timeout):
            raise ConfigurationError(
                f"{self.kind}: timeout must be a finite, positive number of seconds, "
                f"got {timeout!r}"
            )
        self.timeout = timeout
        # The URL may hold a credential (Slack's does): the name derives from it, never shows it.
        digest = hashlib.sha256(url.encode()).hexdigest()[:12]
        self._name = self._checked_name(name) or f"{self.kind}:{host}:{digest}"

    def _checked_url(self, url: object) -> str:
        """The host name of an http(s) URL; ``ConfigurationError`` for any other value."""
        refusal = ConfigurationError(f"{self.kind}: the URL must be http:// or https://")
        if not isinstance(url, str):
            raise refusal
        try:
            parts = urlsplit(url)
            # Read now: a port past 65535 raises here, not at every attempt to send.
            port = parts.port
        except ValueError:
            raise refusal from None
        if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
            raise refusal
        return parts.hostname

    def _selection(self, option: str, values: object, when_none: str) -> frozenset[str] | None:
        """``values`` as a set of non-empty strings (None: no restriction).

        A string is refused rather than read as the set of its characters, which would
        route nothing here and say nothing.
        """
        if values is None:
            return None
        if isinstance(values, str):
            raise ConfigurationError(
                f"{self.kind}: {option} must be a list, e.g. [{values!r}], not a string"
            )
        if not isinstance(values, list | tuple | AbstractSet) or not all(
            isinstance(value, str) and value for value in values
        ):
            raise ConfigurationError(f"{self.kind}: {option} must be a list of non-empty strings")
        if not values:
            raise ConfigurationError(f"{self.kind}: {option} is empty ({when_none})")
        return frozenset(values)

    def _checked_name(self, name: object) -> str | None:
        """``name`` if it is a usable notifier name (None: derive one from the URL)."""
        if name is None:
            return None
        problem = notifier_name_problem(name)
        if problem is not None:
            raise ConfigurationError(f"{self.kind}: {problem}")
        assert isinstance(name, str)
        return name

    @property
    def name(self) -> str:
        """A stable name, unique in the host (from the URL unless given)."""
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"

    def wants(self, event: ApprovalEvent) -> bool:
        """Whether the event's tenant and kind are routed here."""
        return (self.tenants is None or event.tenant_id in self.tenants) and (
            self.events is None or event.kind in self.events
        )

    async def post(self, body: bytes, headers: Mapping[str, str]) -> None:
        """POST ``body``; any answer but 2xx (or no answer) raises ``NotificationFailed``."""
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError("notifiers need httpx: pip install 'charter[notify]'") from exc
        try:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
                response = await client.post(self._url, content=body, headers=dict(headers))
        except httpx.HTTPError as exc:
            raise NotificationFailed(
                f"{self._name}: the receiver could not be reached ({type(exc).__name__})"
            ) from None
        if not 200 <= response.status_code < 300:
            raise NotificationFailed(f"{self._name}: the receiver answered {response.status_code}")
