"""Resources, resource templates and prompts, authored once like tools.

``@resource("trip://{trip_id}", required_scopes=("trips:read",))`` and ``@prompt(...)``
declare them; ``Registry.register`` adds them beside the tools; the host decides who may
list, read, get and complete them (``Host.content``), and MCP and REST render that.
"""

from __future__ import annotations

from ._catalog import ContentCatalog as ContentCatalog
from ._contents import BlobContents as BlobContents
from ._contents import PromptAudio as PromptAudio
from ._contents import PromptContent as PromptContent
from ._contents import PromptImage as PromptImage
from ._contents import PromptMessage as PromptMessage
from ._contents import PromptResource as PromptResource
from ._contents import PromptResult as PromptResult
from ._contents import PromptText as PromptText
from ._contents import ResourceContents as ResourceContents
from ._contents import ResourceRead as ResourceRead
from ._contents import TextContents as TextContents
from ._definitions import Access as Access
from ._definitions import Completer as Completer
from ._definitions import Prompt as Prompt
from ._definitions import PromptArgument as PromptArgument
from ._definitions import Resource as Resource
from ._definitions import complete_values as complete_values
from ._definitions import prompt as prompt
from ._definitions import resource as resource
from ._template import UriTemplate as UriTemplate

__all__ = (
    "Access",
    "BlobContents",
    "Completer",
    "ContentCatalog",
    "Prompt",
    "PromptArgument",
    "PromptAudio",
    "PromptContent",
    "PromptImage",
    "PromptMessage",
    "PromptResource",
    "PromptResult",
    "PromptText",
    "Resource",
    "ResourceContents",
    "ResourceRead",
    "TextContents",
    "UriTemplate",
    "complete_values",
    "prompt",
    "resource",
)
