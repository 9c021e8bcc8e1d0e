"""llama-server closes a connection after every stream: back-to-back serial requests
against it (each sent the instant the last one ended, where a pooled connection would race
that close) must all succeed."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.client import (
    CompletionRequest,
    ConnectionPolicy,
    OpenAIClient,
    RequestRecord,
    run,
)
from batchprobe.engines import Installation, launch

pytestmark = pytest.mark.engine

REQUESTS = 40


def test_back_to_back_serial_streams_have_no_errors(
    llama_env: Installation, gemma3_270m: Path, tmp_path: Path
) -> None:
    policies: list[ConnectionPolicy] = []
    with launch("llama.cpp", gemma3_270m, "batching", 2, log_path=tmp_path / "llama.log") as eng:

        async def go() -> list[RequestRecord]:
            records = []
            async with OpenAIClient(eng.base_url, model=eng.model_id) as client:
                policies.append(client.connection_policy)
                for i in range(REQUESTS):
                    req = CompletionRequest(
                        request_id=f"keepalive-{i}",
                        prompt=f"Line {i}: the weather today is",
                        max_tokens=4,
                        extra_body={"cache_prompt": False},
                    )
                    records.append(await client.complete(req))
            return records

        records = run(go())
    assert all(r.ok for r in records), [r.error for r in records if r.error]
    assert all(r.completion_tokens for r in records)
    # The client learnt the server's policy: at most the first reuse needed a reconnect.
    [policy] = policies
    reconnects = [r.reconnect for r in records if r.reconnect is not None]
    assert len(reconnects) <= 1, (policy, reconnects)
    print(f"llama-server connections: {policy.mode} ({policy.reason}); reconnects: {reconnects}")
