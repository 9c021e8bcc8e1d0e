"""The fake OpenAI-compatible server: latency model, batching model, fault and bug modes.

It serves tests, demos and benchmarks; it is not an engine. Recall prompts are answered
with the needle code read from the prompt, so recall is meaningful; other prompts get
deterministic pseudo-words derived from the prompt.
"""

from __future__ import annotations

from batchprobe.fake._app import build_app
from batchprobe.fake._config import (
    BATCHING_MODES,
    FAULT_MODES,
    FAULT_WHEN_MODES,
    LOGPROBS_FORMATS,
    Batching,
    FakeServerConfig,
    Fault,
    FaultWhen,
    LogprobsFormat,
)
from batchprobe.fake._process import FakeServerProcess
from batchprobe.fake._run import FakeServerThread, serve
from batchprobe.fake._state import StopReason

__all__ = [
    "BATCHING_MODES",
    "FAULT_MODES",
    "FAULT_WHEN_MODES",
    "LOGPROBS_FORMATS",
    "Batching",
    "FakeServerConfig",
    "FakeServerProcess",
    "FakeServerThread",
    "Fault",
    "FaultWhen",
    "LogprobsFormat",
    "StopReason",
    "build_app",
    "serve",
]
