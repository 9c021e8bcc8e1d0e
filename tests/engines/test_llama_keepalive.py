"""llama-server closes a kept-alive connection after a stream: the client's serial traffic
against it must stay free of errors, with only provable, recorded retries."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchprobe.client import CompletionRequest, OpenAIClient, RequestRecord, run
from batchprobe.engines import Installation, launch

pytestmark = pytest.mark.engine

REQUESTS = 12


def test_serial_streams_on_kept_alive_connections_have_no_errors(
    llama_env: Installation, gemma3_270m: Path, tmp_path: Path
) -> None:
    with launch("llama.cpp", gemma3_270m, "batching", 2, log_path=tmp_path / "llama.log") as eng:

        async def go() -> list[RequestRecord]:
            records = []
            async with OpenAIClient(eng.base_url, model=eng.model_id) as client:
                for i in range(REQUESTS):
                    req = CompletionRequest(
                        request_id=f"keepalive-{i}",
                        prompt=f"Line {i}: the weather today is",
                        max_tokens=6,
                        extra_body={"cache_prompt": False},
                    )
                    records.append(await client.complete(req))
            return records

        records = run(go())
    assert all(r.ok for r in records), [r.error for r in records if r.error]
    # Retries, if the server closed a connection under the client, are recorded and single.
    assert all(len(r.retries) <= 1 for r in records)
    print("retries:", sum(len(r.retries) for r in records), [r.retries for r in records if r.retries])
