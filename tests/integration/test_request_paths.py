"""The second request path is used only after a real 1-token generation over it succeeded:
a server without /v1/completions (transformers serve 4.56.2) gets no request there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web

from aioserver import serve
from batchprobe.client import OpenAIClient, run
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe import plan_run, run_plan
from batchprobe.results import Outcome, Status
from batchprobe.send.discover import serves_other_path

FAST: dict[str, object] = {"ttft_ms": 2.0, "itl_ms": 0.5}


def test_the_default_run_sends_only_a_probe_over_completions_to_a_chat_only_server(
    tmp_path: Path,
) -> None:
    with FakeServerThread(FakeServerConfig(serve_completions=False, **FAST)) as server:  # type: ignore[arg-type]
        plan = plan_run(base_url=server.base_url, output=tmp_path / "v.json", prompt_style="chat")
        report = run_plan(plan)
        requests = server.requests
    # Only the discovery's 1-token probe, refused; nothing measured, nothing judged there.
    assert requests.get("completions", 0) == 1, requests
    assert requests["chat"] > 0
    assert report.status is Status.OK
    assert report.verdict.outcome is Outcome.PASS, report.verdict.reasons
    apis = {s.situation.api for a in report.arms for s in a.sessions if s.situation}
    assert apis == {"chat"}


def test_both_paths_are_used_where_both_answer(tmp_path: Path) -> None:
    with FakeServerThread(FakeServerConfig(**FAST)) as server:  # type: ignore[arg-type]
        plan = plan_run(base_url=server.base_url, output=tmp_path / "v.json", prompt_style="chat",
                        quick=True, shapes="params", workloads="decode")  # fmt: skip
        report = run_plan(plan)
        requests = server.requests
    assert requests["completions"] > 0 and requests["chat"] > 0
    apis = {s.situation.api for a in report.arms for s in a.sessions if s.situation}
    assert apis == {"chat", "completions"}



@pytest.mark.parametrize(("style", "refused"), [("completion", "/v1/chat/completions"),
                                                ("chat", "/v1/completions")])  # fmt: skip
def test_the_other_path_is_probed_in_either_direction(style: str, refused: str) -> None:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request.path)
        if request.path == refused:
            return web.Response(status=404, text='{"detail":"Not Found"}')
        chat = request.path.endswith("chat/completions")
        choice = {"index": 0, "finish_reason": "length",
                  **({"message": {"role": "assistant", "content": "Hi"}} if chat else {"text": " Hi"})}  # fmt: skip
        return web.Response(text=json.dumps({"choices": [choice]}), content_type="application/json")

    async def go() -> tuple[bool, bool]:
        async with serve(handler) as url, OpenAIClient(url) as client:
            refused_answer = await serves_other_path(client, "r", style, {})
            other = "chat" if style == "completion" else "completion"
            served_answer = await serves_other_path(client, "r", other, {})
        return refused_answer, served_answer

    refused_answer, served_answer = run(go())
    assert (refused_answer, served_answer) == (False, True)
    assert seen[0] == refused
