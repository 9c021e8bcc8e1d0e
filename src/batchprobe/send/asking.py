"""What discovery asks the server through (:class:`Asker`), and the run's client watched while
it asks (:class:`Watched`): a discovery request that times out leaves the question whether
anything still generates. A 1-token request then gets the liveness window, and when nothing
comes back the run ends as stalled instead of each later question waiting out its own timeout
(a dead generation thread behind a live HTTP front answers none of them: mlx-lm 0.31.1 dies on
discovery's own re-sent prompts with a sliding-window model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from batchprobe.client import OpenAIClient
from batchprobe.client.types import CompletionRequest, RequestRecord
from batchprobe.errors import EngineStalled
from batchprobe.send.arm import TIMEOUTS, side_request, silent


class Asker(Protocol):
    """The requests discovery sends: an :class:`OpenAIClient`, or one :class:`Watched`."""

    async def complete(self, req: CompletionRequest) -> RequestRecord: ...

    async def tokenize(self, text: str) -> int | None: ...

    async def token_ids(self, text: str) -> list[int] | None: ...


@dataclass
class Watched:
    """``client`` for discovery: a request that ends in a timeout is followed by a 1-token
    request; :class:`EngineStalled` when that gets no reply within ``liveness_s``."""

    client: OpenAIClient
    liveness_s: float

    async def complete(self, req: CompletionRequest) -> RequestRecord:
        record = await self.client.complete(req)
        error = record.error
        if error is None or error.kind not in TIMEOUTS:
            return record
        probe = side_request(f"{req.request_id}-liveness", f"liveness {req.request_id}",
                             req.api, 1, req.extra_body)
        if await silent(self.client, probe, self.liveness_s):
            raise EngineStalled(
                f"the server stopped generating while batchprobe asked what it supports: "
                f"{req.request_id} ended with {error.kind.value}, then a 1-token request got "
                f"no token within {self.liveness_s:g} s"
            )
        return record

    async def tokenize(self, text: str) -> int | None:
        return await self.client.tokenize(text)

    async def token_ids(self, text: str) -> list[int] | None:
        return await self.client.token_ids(text)
