"""Async OpenAI-compatible client (aiohttp) with per-token timing.

``OpenAIClient.complete`` never raises for a failed request: the returned
``RequestRecord`` carries a ``RequestError`` whose ``ErrorKind`` is decided in one place.
"""

from __future__ import annotations

from batchprobe._aio import run
from batchprobe.client._client import OpenAIClient
from batchprobe.client._connection import ConnectionPolicy
from batchprobe.client._lag import LoopLag
from batchprobe.client._procs import ClientPool, Completer
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
    "ClientPool",
    "Completer",
    "CompletionRequest",
    "ConnectionPolicy",
    "ErrorKind",
    "Limits",
    "LoopLag",
    "OpenAIClient",
    "RequestError",
    "RequestRecord",
    "Timeouts",
    "TokenAlternative",
    "TokenChoice",
    "run",
]
