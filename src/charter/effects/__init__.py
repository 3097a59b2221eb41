"""Effects: durable, keyed work outside the database, recorded with the call that asks for it.

- ``effect``/``Effect``: a named async ``fn(payload, key)``, registered on the ``Registry``.
- ``records``: ``EffectRecord``, its status, and ``effect_key``.
- ``protocols``: ``EffectStore``, what a store keeps of the outbox.
- ``changes``: the outbox's changes of a delivery (finish, re-drive, discard), for stores.

The delivery (fast path after commit, workers, retries) lives in ``charter.host``.
"""

from __future__ import annotations

from ._effect import Effect as Effect
from ._effect import EffectFunction as EffectFunction
from ._effect import effect as effect
from .protocols import EffectStore as EffectStore
from .records import EffectRecord as EffectRecord
from .records import EffectStatus as EffectStatus
from .records import effect_key as effect_key

__all__ = (
    "Effect",
    "EffectFunction",
    "EffectRecord",
    "EffectStatus",
    "EffectStore",
    "effect",
    "effect_key",
)
