"""A JWKS URL as a key source: fetched in a worker thread, cached, refetched for a new ``kid``."""

from __future__ import annotations

import asyncio
import http.client
import logging
import math
import time

import jwt

from ._keys import VerificationKey, jwk_keys
from ._rejections import keys_unavailable

__all__ = ("RemoteKeys",)

logger = logging.getLogger("charter.jwt")


class RemoteKeys:
    """A JWKS URL, fetched and cached by PyJWT's ``PyJWKClient`` in a worker thread.

    A known ``kid`` is found in the cache without leaving the event loop. An unknown one
    refetches the set, at most once per ``cooldown`` seconds after the last fetch, and one
    lookup at a time: callers waiting meanwhile see the refreshed set, or the failure.
    """

    def __init__(self, url: str, *, lifespan: float, cooldown: float, timeout: float) -> None:
        self.url = url
        self._client = jwt.PyJWKClient(url, cache_jwk_set=True, lifespan=lifespan, timeout=timeout)
        self._cooldown = cooldown
        self._lock = asyncio.Lock()
        self._fetched_at = -math.inf
        self._failed_at = -math.inf

    def _cached(self, kid: str) -> list[VerificationKey]:
        cache = self._client.jwk_set_cache
        keyset = cache.get() if cache is not None else None
        return [] if keyset is None else jwk_keys(keyset, kid)

    async def find(self, kid: str | None) -> list[VerificationKey]:
        if kid is None:
            return []  # a JWKS names its keys; a token that names none matches none
        found = self._cached(kid)
        if found:
            return found
        arrived = time.monotonic()
        async with self._lock:
            # A fetch failed while this call waited, or moments ago: fail now rather than
            # queue another behind an issuer that is down.
            if self._failed_at > arrived or time.monotonic() - self._failed_at < self._cooldown:
                raise keys_unavailable()
            return await asyncio.to_thread(self._lookup, kid)

    def _lookup(self, kid: str) -> list[VerificationKey]:
        # In a worker thread, one at a time (the lock): PyJWKClient blocks on the network.
        cache = self._client.jwk_set_cache
        if cache is not None and cache.get() is not None:  # else: first use, or expired
            found = self._cached(kid)
            if found or time.monotonic() - self._fetched_at < self._cooldown:
                return found
        try:
            keyset = self._client.get_jwk_set(refresh=True)
        except (jwt.PyJWTError, OSError, ValueError, http.client.HTTPException) as exc:
            self._failed_at = time.monotonic()
            logger.warning("charter.jwt: cannot fetch the JWKS at %r: %r", self.url, exc)
            raise keys_unavailable() from None
        self._fetched_at = time.monotonic()
        return jwk_keys(keyset, kid)
