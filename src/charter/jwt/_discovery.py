"""OIDC discovery: read an issuer's JWKS URL from its discovery document, before serving."""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.request
from typing import Any

from ..errors import ConfigurationError
from ._config import check_url

__all__ = ("discover_jwks_url",)

_MAX_DOCUMENT_BYTES = 1 << 20


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _fetch_json(url: str, timeout: float) -> object:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.build_opener(_NoRedirect()).open(request, timeout=timeout) as response:
        return json.loads(response.read(_MAX_DOCUMENT_BYTES))


async def discover_jwks_url(issuer: str, *, timeout: float = 5.0) -> str:
    """Read an OIDC issuer's JWKS URL from its discovery document, once, before serving.

    Fetches ``issuer + "/.well-known/openid-configuration"`` (OpenID Connect Discovery 1.0)
    in a worker thread and checks that the document names the same issuer.

    Args:
        issuer: The issuer identifier, as its tokens' ``iss`` reads.
        timeout: Seconds the fetch may take.

    Returns:
        The ``jwks_uri`` to pass as ``JwtAuthenticator(jwks_url=...)``.

    Raises:
        ConfigurationError: The issuer is not an https URL, the document cannot be fetched,
            or it names another issuer or no usable ``jwks_uri``.
    """
    check_url(issuer, "issuer")
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        document = await asyncio.to_thread(_fetch_json, url, timeout)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise ConfigurationError(f"cannot read the OIDC discovery document {url}: {exc}") from exc
    if not isinstance(document, dict) or document.get("issuer") != issuer:
        raise ConfigurationError(f"the OIDC discovery document {url} names another issuer")
    jwks_uri = document.get("jwks_uri")
    if not isinstance(jwks_uri, str):
        raise ConfigurationError(f"the OIDC discovery document {url} has no jwks_uri")
    check_url(jwks_uri, "jwks_uri")
    return jwks_uri
