"""A small travel back office on charter: `charter serve examples.travel:host`."""

from __future__ import annotations

from .app import (
    DEMO_PRINCIPALS,
    build_host,
    build_registry,
    demo_keys_file,
    ensure_demo_keys,
    host,
)
from .tools import TravelContext

__all__ = (
    "DEMO_PRINCIPALS",
    "TravelContext",
    "build_host",
    "build_registry",
    "demo_keys_file",
    "ensure_demo_keys",
    "host",
)
