"""The registry: register tools, look them up, validate input once, run handlers.

The registry never checks scopes, tenancy, confirmation or approvals; that is the host's
job (``charter.host``).

- ``_registry``: ``Registry`` (registration, lookup, prepare and dispatch, admission).
- ``_binding``: how a definition and its ``ToolBinding`` become a registered tool.
- ``_validation``: input and output validation (``finish_output``).
- ``_targets``: resolving an action's target.
- ``_execution``: running a handler under its timeout and cancel signal.
- ``_prepared``: ``PreparedAction``.
"""

from __future__ import annotations

from ._prepared import PreparedAction as PreparedAction
from ._registry import Registry as Registry
from ._validation import finish_output as finish_output

__all__ = ("PreparedAction", "Registry", "finish_output")
