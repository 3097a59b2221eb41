"""The host: one pipeline every transport calls, and what it takes and gives.

- ``_host``: ``Host``, the pipeline built around a registry with its parts: discovery,
  and one method per thing below, each in its own module.
- ``_pipeline``: the steps every call runs, in order (``invoke``: ``prepare`` then
  ``execute``; ``Host`` is a ``Pipeline``); ``_pauses``: ``resume`` and
  ``request_approval``; ``_settle``: settling a deferred call; ``_standing``: the audit
  events and budgets a caller may read; ``_serving``: opening the store for serving.
- ``_calls``: ``CallOptions`` (a transport's facts about a call), ``PreparedCall``,
  ``Settlement``, the request-id helpers.
- the steps ``prepare`` runs, one idea each: ``_arguments`` (payload limits, reserved
  controls), ``_access`` (audience, auth mode, scopes, actor types; for tools, resources
  and prompts alike), ``_tenancy``,
  ``_context`` (the handler's context); ``_trace`` and ``_ids`` for the audit event.
- ``_effects``: ``Effects`` (``host.effects``), the outbox's delivery: the fast path after
  commit, worker passes with retries, enqueueing from host code, listing and re-driving.
- ``_content``: ``HostContent`` (``Host.content``): resources, resource templates and
  prompts under the same authority as tools.
"""

from __future__ import annotations

from ._calls import CallOptions as CallOptions
from ._calls import ContextFactory as ContextFactory
from ._calls import PreparedCall as PreparedCall
from ._calls import Settlement as Settlement
from ._calls import canonical_request_id as canonical_request_id
from ._calls import derive_request_id as derive_request_id
from ._content import ContentContextFactory as ContentContextFactory
from ._content import HostContent as HostContent
from ._content import ResourceListener as ResourceListener
from ._effects import EffectAction as EffectAction
from ._effects import EffectBatch as EffectBatch
from ._effects import EffectListing as EffectListing
from ._effects import Effects as Effects
from ._host import Host as Host

__all__ = (
    "CallOptions",
    "ContentContextFactory",
    "ContextFactory",
    "EffectAction",
    "EffectBatch",
    "EffectListing",
    "Effects",
    "Host",
    "HostContent",
    "PreparedCall",
    "ResourceListener",
    "Settlement",
    "canonical_request_id",
    "derive_request_id",
)
