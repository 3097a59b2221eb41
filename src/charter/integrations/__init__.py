"""Bridges to agent frameworks; each module imports its framework and needs an extra.

``charter.integrations.pydantic_ai`` (``pip install 'charter[pydantic-ai]'``) and
``charter.integrations.langchain`` (``pip install 'charter[langchain]'``). Importing
this package imports neither framework.
"""

from __future__ import annotations

__all__ = ()
