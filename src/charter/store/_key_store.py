"""``SqlStore``'s API key methods: create, list, revoke and verify keys."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from ..auth import PrincipalKind
from . import _keys
from ._access import SqlAccess
from ._connections import run_to_completion
from ._errors import translated
from .api_keys import ApiKeyRecord

__all__ = ("SqlApiKeys",)


class SqlApiKeys(SqlAccess):
    """The API key half of ``SqlStore`` (the SQL itself is in ``_keys``)."""

    @run_to_completion
    async def create_api_key(
        self,
        *,
        tenant_id: str,
        subject: str,
        scopes: Iterable[str],
        kind: PrincipalKind = "agent",
        actor: str = "staff",
        name: str | None = None,
        expires_at: datetime | None = None,
    ) -> tuple[str, ApiKeyRecord]:
        """Create an API key; the returned ``chk_<id>_<secret>`` is the only copy of the secret.

        Args:
            tenant_id: The tenant the key acts for.
            subject: The principal's subject (who the key stands for).
            scopes: Granted scopes, each valid as given (``charter.auth.is_valid_scope``).
            kind: The principal kind the key authenticates as (``agent`` by default; only
                ``person`` keys may decide approvals).
            actor: The principal's audience.
            name: A label for people.
            expires_at: When the key stops working (timezone-aware), or None.

        Returns:
            The key to hand over once, and its record (which never holds the secret).

        Raises:
            ValueError: A scope, tenant, subject, actor or kind is invalid, or
                ``expires_at`` is naive.
        """
        async with self._connection(self.busy_timeout) as conn:
            with translated("creating an API key"):
                return await _keys.create_key(
                    conn,
                    tenant_id=tenant_id,
                    subject=subject,
                    scopes=scopes,
                    kind=kind,
                    actor=actor,
                    name=name,
                    expires_at=expires_at,
                    now=datetime.now(UTC),
                )

    @run_to_completion
    async def list_api_keys(self, tenant_id: str | None = None) -> list[ApiKeyRecord]:
        """The API keys of one tenant (or all), oldest first; never their secrets."""
        async with self._connection(None) as conn:
            with translated("listing API keys"):
                return await _keys.list_keys(conn, tenant_id)

    @run_to_completion
    async def revoke_api_key(self, key_id: str) -> bool:
        """Revoke a key; False when it does not exist or was already revoked.

        Servers that remember a verified key (``ApiKeyAuthenticator(cache_seconds=…)``, 5 s
        by default) refuse it once that time has passed.
        """
        async with self._connection(self.busy_timeout) as conn:
            with translated("revoking an API key"):
                return await _keys.revoke_key(conn, key_id, datetime.now(UTC))

    @run_to_completion
    async def verify_api_key(self, presented: str, *, now: datetime) -> ApiKeyRecord | None:
        """The active key ``presented`` names if its secret matches, else None (no reason why)."""
        async with self._connection(None) as conn:
            with translated("checking an API key"):
                return await _keys.verify_key(conn, presented, now)
