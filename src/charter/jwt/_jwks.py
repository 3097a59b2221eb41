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
    A lookup gets ``timeout`` seconds in all: urllib's own timeout bounds each read, so an
    issuer trickling its answer in would hold every caller. Past the deadline the lookup
    fails; its thread, which cannot be stopped, finishes on its own, and no other lookup
    starts until it has.
    """

    def __init__(self, url: str, *, lifespan: float, cooldown: float, timeout: float) -> None:
        self.url = url
        self._client = jwt.PyJWKClient(url, cache_jwk_set=True, lifespan=lifespan, timeout=timeout)
        self._cooldown = cooldown
        self._timeout = timeout
        self._lock = asyncio.Lock()
        self._fetched_at = -math.inf
        self._failed_at = -math.inf
        self._lookup_thread: asyncio.Future[list[VerificationKey]] | None = None

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
            if self._lookup_thread is not None and not self._lookup_thread.done():
                raise keys_unavailable()  # the last lookup outlived its deadline: still busy
            lookup = asyncio.ensure_future(asyncio.to_thread(self._lookup, kid))
            lookup.add_done_callback(_retrieve)
            self._lookup_thread = lookup
            try:
                return await asyncio.wait_for(asyncio.shield(lookup), self._timeout)
            except TimeoutError:
                self._failed_at = time.monotonic()
                logger.warning(
                    "charter.jwt: the JWKS at %r took longer than %g s", self.url, self._timeout
                )
                raise keys_unavailable() from None

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


def _retrieve(lookup: asyncio.Future[list[VerificationKey]]) -> None:
    """Take a lookup's outcome, which nobody awaits once its deadline passed."""
    if not lookup.cancelled():
        lookup.exception()
