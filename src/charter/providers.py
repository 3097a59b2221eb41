"""Provider formats; they live in ``charter.harness.providers``, re-exported here.

The formats are part of the harness (they read its transcript and tool definitions);
this module keeps ``from charter.providers import ...`` working. A star import, so the two
names lists cannot drift apart.
"""

from __future__ import annotations

from .harness import providers as _providers
from .harness.providers import *  # noqa: F403

__all__ = _providers.__all__
