"""`charter serve --notify FILE`: approval notifiers from a TOML file, secrets from the environment.

```toml
[[webhook]]
url = "https://hooks.example.com/charter"
secret_env = "CHARTER_WEBHOOK_SECRET"   # the variable holding whsec_…
tenants = ["acme"]                      # optional: every tenant when left out
events = ["requested", "expired"]       # optional: all five kinds when left out

[[slack]]
url_env = "CHARTER_SLACK_URL"           # an incoming-webhook URL is a credential too
tenants = ["acme"]
```
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from charter.cli._common import Unusable
from charter.errors import ConfigurationError
from charter.notify import Notifier, Slack, Webhook

__all__ = ("load_notifiers",)

_KEYS = {
    "webhook": {"url", "url_env", "secret_env", "tenants", "events", "name", "timeout"},
    "slack": {"url", "url_env", "tenants", "events", "name", "timeout"},
}


def load_notifiers(path: str, environ: Mapping[str, str] | None = None) -> list[Notifier]:
    """The notifiers a TOML file declares, their secrets read from ``environ``.

    Raises:
        Unusable: the file is missing or not TOML, a table is malformed or holds an option
            the notifier refuses, or a variable it names is not set.
    """
    env = os.environ if environ is None else environ
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise Unusable(f"--notify: cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise Unusable(f"--notify: {path} is not valid TOML: {exc}") from None
    unknown = sorted(set(document) - set(_KEYS))
    if unknown:
        raise Unusable(
            f"--notify: unknown tables {unknown} in {path}; use [[webhook]] or [[slack]]"
        )
    notifiers: list[Notifier] = []
    for kind in _KEYS:
        tables = document.get(kind, [])
        if not isinstance(tables, list):
            raise Unusable(f"--notify: write [[{kind}]] (an array of tables) in {path}")
        for index, table in enumerate(tables):
            where = f"[[{kind}]] #{index + 1} in {path}"
            notifiers.append(_notifier(kind, table, where, env))
    return notifiers


def _notifier(kind: str, table: dict[str, Any], where: str, env: Mapping[str, str]) -> Notifier:
    extra = sorted(set(table) - _KEYS[kind])
    if extra:
        raise Unusable(f"--notify: {where}: unknown keys {extra}; use {sorted(_KEYS[kind])}")
    url = _url(table, where, env)
    options: dict[str, Any] = {
        key: table[key] for key in ("tenants", "events", "name", "timeout") if key in table
    }
    try:
        if kind == "slack":
            return Slack(url, **options)
        variable = table.get("secret_env")
        if not isinstance(variable, str) or not variable:
            raise Unusable(f"--notify: {where}: secret_env names the variable holding the secret")
        secret = env.get(variable)
        if not secret:
            raise Unusable(f"--notify: {where}: the environment variable {variable} is not set")
        return Webhook(url, secret=secret, **options)
    except ConfigurationError as exc:
        raise Unusable(f"--notify: {where}: {exc}") from None


def _url(table: dict[str, Any], where: str, env: Mapping[str, str]) -> str:
    if ("url" in table) == ("url_env" in table):
        raise Unusable(f"--notify: {where}: give exactly one of url and url_env")
    if "url" in table:
        url = table["url"]
        if not isinstance(url, str):
            raise Unusable(f"--notify: {where}: url must be a string")
        return url
    variable = table["url_env"]
    value = env.get(variable) if isinstance(variable, str) else None
    if not value:
        raise Unusable(f"--notify: {where}: the environment variable {variable} is not set")
    return value
