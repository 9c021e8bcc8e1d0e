"""Async OpenAI-compatible client (aiohttp) with per-token timing.

``OpenAIClient.complete`` never raises for a failed request: the returned
``RequestRecord`` carries a ``RequestError`` whose ``ErrorKind`` is decided in one place.
"""

from __future__ import annotations

from batchprobe._aio import run
from batchprobe.client._client import OpenAIClient
from batchprobe.client.limits import Limits
from batchprobe.client.timeouts import Timeouts
from batchprobe.client.types import (
    Api,
    ChatMessage,
    CompletionRequest,
    ErrorKind,
    RequestError,
    RequestRecord,
    TokenAlternative,
    TokenChoice,
)

__all__ = [
    "Api",
    "ChatMessage",
    "CompletionRequest",
    "ErrorKind",
    "Limits",
    "OpenAIClient",
    "RequestError",
    "RequestRecord",
    "Timeouts",
    "TokenAlternative",
    "TokenChoice",
    "run",
]
