"""What every HTTP notifier shares: its URL, its routing (tenants, kinds) and the POST."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from ..errors import CharterError, ConfigurationError
from ..host._notices import ApprovalEvent
from ..ledger.approvals import ApprovalChange

__all__ = ("HttpNotifier", "NotificationFailed")

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
        tenants: Iterable[str] | None = None,
        events: Iterable[ApprovalChange] | None = None,
        name: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        """Send to ``url`` the events of ``tenants`` (all when None) of ``events`` kinds.

        Raises:
            ConfigurationError: the URL is not http(s), a kind is unknown, a tenant list
                is empty, or the timeout is not positive.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(f"{self.kind}: the URL must be http:// or https://")
        self._url = url
        self.tenants = frozenset(tenants) if tenants is not None else None
        if self.tenants is not None and not self.tenants:
            raise ConfigurationError(f"{self.kind}: tenants is empty (None means every tenant)")
        self.events = frozenset(events) if events is not None else None
        unknown = sorted((self.events or frozenset()) - _KINDS)
        if unknown:
            raise ConfigurationError(
                f"{self.kind}: unknown event kinds {unknown}; use {sorted(_KINDS)}"
            )
        if timeout <= 0:
            raise ConfigurationError(f"{self.kind}: timeout must be positive")
        self.timeout = timeout
        # The URL may hold a credential (Slack's does): the name derives from it, never shows it.
        digest = hashlib.sha256(url.encode()).hexdigest()[:12]
        self._name = name or f"{self.kind}:{parts.hostname}:{digest}"

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
