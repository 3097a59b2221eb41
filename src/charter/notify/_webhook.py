"""``Webhook``: approval events POSTed as JSON, signed per the Standard Webhooks spec."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

from ..errors import ConfigurationError
from ..host._notices import ApprovalEvent
from ..ledger.approvals import ApprovalChange
from ._http import HttpNotifier, Selection

__all__ = ("Webhook",)


class Webhook(HttpNotifier):
    """POSTs ``{"type", "timestamp", "data"}`` with ``webhook-id``, ``-timestamp``, ``-signature``.

    ``webhook-id`` is the event's id, the same on every attempt, so a receiver that
    remembers the ids it processed handles each event once. The signature covers the id,
    the timestamp of the attempt and the exact body (HMAC-SHA256 with the shared secret);
    verify it with the ``standardwebhooks`` package or any Standard Webhooks library.
    """

    kind = "webhook"

    def __init__(
        self,
        url: str,
        *,
        secret: str,
        tenants: Selection[str] | None = None,
        events: Selection[ApprovalChange] | None = None,
        name: str | None = None,
        timeout: float = 10.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Sign with ``secret`` (``whsec_`` + base64, as Standard Webhooks secrets are).

        Args:
            url: where to POST.
            secret: the shared signing secret, ``whsec_<base64>``; keep it out of code
                (``charter serve`` reads it from an environment variable).
            tenants: a list of the tenants whose events go here (None: every tenant).
            events: a list of the kinds sent (None: all five).
            name: a stable name unique in the host (default: derived from the URL).
            timeout: seconds one attempt may take (finite, above zero).
            clock: the signing time (tests); the current time by default.

        Raises:
            ConfigurationError: the secret is empty or not base64, the clock is not
                callable, or an option ``HttpNotifier`` checks is invalid.
            ImportError: the ``standardwebhooks`` package is missing.
        """
        super().__init__(url, tenants=tenants, events=events, name=name, timeout=timeout)
        try:
            from standardwebhooks import Webhook as Signer
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "webhook signing needs standardwebhooks: pip install 'charter[notify]'"
            ) from exc
        try:
            self._signer = Signer(secret)
        except Exception:
            # Never echo the secret, not even part of it.
            raise ConfigurationError(
                "webhook: the secret must be 'whsec_' followed by base64 (non-empty)"
            ) from None
        if clock is not None and not callable(clock):
            raise ConfigurationError("webhook: clock must be a function returning a datetime")
        self._clock = clock or (lambda: datetime.now(UTC))

    def body(self, event: ApprovalEvent) -> str:
        """The JSON body of an event (the same bytes on every attempt)."""
        payload = {
            "type": event.type,
            "timestamp": event.occurred_at.isoformat().replace("+00:00", "Z"),
            "data": event.model_dump(mode="json"),
        }
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)

    def headers(self, event: ApprovalEvent, body: str) -> dict[str, str]:
        """The Standard Webhooks headers of one attempt, signed now."""
        now = self._clock()
        return {
            "content-type": "application/json",
            "webhook-id": event.id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self._signer.sign(event.id, now, body),
        }

    async def send(self, event: ApprovalEvent) -> None:
        """POST one event, signed at this attempt.

        Raises:
            NotificationFailed: the receiver answered other than 2xx, or not at all.
        """
        body = self.body(event)
        await self.post(body.encode(), self.headers(event, body))
