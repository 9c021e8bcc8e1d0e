"""Every step of the default plan carries every role: each params role, joiners up to half
the depth, at least four ragged lengths, and a wave that still reaches the depth."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from aiohttp import web

from aioserver import serve
from batchprobe.client import OpenAIClient, run
from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe import plan_run
from batchprobe.send.discover import BIAS_WORDS, bias_tokens
from batchprobe.send.items import Plans, build_plans
from batchprobe.workload.shapes import ShapePlan
from batchprobe.workload.shapes.params import ROLES, WITH_LOGPROBS

PARAMS_ROLES = {"greedy", "open", "control", "sampled", "bias", "stop", "penalty"}
# Rows only where discovery found the server honours them (the fake honours both, and
# answers two choices in one request).
CONSTRAINED = {"json_schema", "grammar"}
CHOICES = {"choices"}


def _default_plans(tmp_path: Path) -> tuple[list[int], Plans]:
    """What ``batchprobe run --base-url URL`` (no other option) would send, against the fake."""
    # An ITL the client sees token by token even on loaded cores (join needs streaming).
    with FakeServerThread(FakeServerConfig(ttft_ms=1, itl_ms=5)) as server:
        plan = plan_run(base_url=server.base_url, output=tmp_path / "v.json")

        async def go() -> Plans:
            async with OpenAIClient(server.base_url) as client:
                return await build_plans(plan.config, "r1", client, {})

        plans = run(go())
    assert plan.config.sweep is not None
    return plan.config.sweep, plans


def _wave_sends(throughput: ShapePlan | None, mixed: list[ShapePlan]) -> int:
    return sum(len(p.sends) for p in mixed)


def test_without_logprobs_the_params_wave_keeps_its_divergence_rows() -> None:
    from batchprobe.workload.shapes.params import roles

    without, with_ = Counter(roles(2)), Counter(roles(2, logprobs=True))
    assert without["open"] == without["control"] == 4 and without["sampled"] == 2
    assert set(with_) == PARAMS_ROLES
    assert sum(with_.values()) == len(WITH_LOGPROBS) - len(CONSTRAINED | CHOICES) < len(ROLES)
    constrained = Counter(roles(2, logprobs=True, constraints=["json_schema", "grammar"]))
    assert set(constrained) == PARAMS_ROLES | CONSTRAINED
    assert set(roles(2, logprobs=True, choices=True)) == PARAMS_ROLES | CHOICES


def test_every_step_of_the_default_plan_carries_every_role(tmp_path: Path) -> None:
    depths, plans = _default_plans(tmp_path)
    assert depths == [1, 2, 4, 8, 16]
    assert set(ROLES) == set(WITH_LOGPROBS) == PARAMS_ROLES | CONSTRAINED | CHOICES
    for depth in depths[1:]:
        mixed = {p.shape: p for p in plans.steps[depth]}
        assert _wave_sends(plans.throughput.get(depth), plans.steps[depth]) >= depth
        params = mixed["params"]
        roles = Counter(i.role for i in params.items)
        assert set(roles) == PARAMS_ROLES | CONSTRAINED | CHOICES, (depth, roles)
        # Two choices in one request: a greedy count and every sampled row.
        several = {i.role for i in params.items if i.params.n == 2}
        assert several == {"choices", "sampled"}
        # The fake returns top logprobs: each greedy row checks its own top-1, so one of each
        # role (and a second open row) is the whole set.
        assert roles["open"] >= 2 and roles["sampled"] >= 1 and roles["control"] >= 1
        # Open rows ask for top logprobs; nothing else does.
        assert all((i.top_logprobs is not None) == (i.role == "open") for i in params.items)
        phases = {s.item.role: s.phase for s in params.sends}
        assert phases["control"] == 1 and all(
            phase == 0 for role, phase in phases.items() if role != "control"
        )
        # The control phase is greedy traffic only.
        assert all(s.item.params.greedy for s in params.sends if s.phase == 1)
        assert any(i.params.logit_bias for i in params.items if i.role == "bias")
        joiners = [s for s in mixed["join"].sends if s.after is not None]
        assert len(joiners) >= depth // 2 and all(s.item.role == "joiner" for s in joiners)
        lengths = {len(i.prompt) for i in mixed["ragged"].items}
        assert len(lengths) >= 4
        assert {i.role for i in mixed["ragged"].items} == {"short", "middle", "long"}
    for plan in plans.plans:
        others = [i for i in plan.items if plan.shape != "params" or i.role != "open"]
        assert all(i.top_logprobs is None for i in others), plan.shape



async def _refusing(request: web.Request) -> web.StreamResponse:
    return web.Response(status=404)


def _word_level(path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "apple": 1, "river": 2, "music": 3}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    return path


def test_bias_ids_come_from_a_local_tokenizer_when_the_server_has_no_tokenize(
    tmp_path: Path,
) -> None:
    model = _word_level(tmp_path / "model")

    async def go(folder: str | None) -> tuple[list[tuple[str, int]], str | None]:
        async with serve(_refusing) as url, OpenAIClient(url) as client:
            found, note = await bias_tokens(client, folder)
        return [(t.text, t.token_id) for t in found], note

    found, note = run(go(str(model)))
    assert note is None
    # WordLevel reads every word as one token; unknown words are [UNK] (id 0), one token too.
    by_word = dict(found)
    assert (by_word[" apple"], by_word[" river"], by_word[" music"]) == (1, 2, 3)
    assert set(by_word) == set(BIAS_WORDS)
    none, why = run(go(None))
    assert none == [] and why is not None
    assert "no /tokenize" in why and "tokenizer.json" in why


def test_a_missing_bias_row_is_said_in_the_run_warnings(tmp_path: Path) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/tokenize":
            return web.Response(status=404)
        body = {"choices": [{"index": 0, "text": " x", "finish_reason": "length"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1}}  # fmt: skip
        return web.Response(text=json.dumps(body), content_type="application/json")

    async def go() -> Plans:
        plan = plan_run(base_url="http://127.0.0.1:9", output=tmp_path / "v.json",
                        shapes="params", workloads="decode", quick=True)  # fmt: skip
        async with serve(handler) as url, OpenAIClient(url) as client:
            return await build_plans(plan.config, "r1", client, {})

    plans = run(go())
    assert any(w.startswith("params: no bias row") for w in plans.warnings), plans.warnings
    # One choice where two were asked for: no row asks for two, and the run says why.
    assert "params: no rows asking for n=2 choices: answered choice indices [0]" in plans.warnings
    (params,) = plans.plans
    assert not any(i.params.logit_bias for i in params.items)
    assert not any(i.params.n for i in params.items) and "choices" not in {
        i.role for i in params.items}
    assert any("no logit bias row" in n for n in params.notes)


def test_a_server_that_refuses_top_logprobs_gets_open_rows_that_ask_none(tmp_path: Path) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/tokenize":
            return web.Response(status=404)
        if "logprobs" in json.loads(await request.read()):
            return web.Response(status=422, text='{"detail": "logprobs: not supported"}')
        body = {"choices": [{"index": 0, "text": " x", "finish_reason": "length"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1}}  # fmt: skip
        return web.Response(text=json.dumps(body), content_type="application/json")

    async def go() -> Plans:
        plan = plan_run(base_url="http://127.0.0.1:9", output=tmp_path / "v.json",
                        shapes="params", workloads="decode", quick=True)  # fmt: skip
        async with serve(handler) as url, OpenAIClient(url) as client:
            return await build_plans(plan.config, "r1", client, {})

    plans = run(go())
    assert any("refused top logprobs" in w for w in plans.warnings), plans.warnings
    (params,) = plans.plans
    assert [i for i in params.items if i.role == "open"]
    assert all(i.top_logprobs is None for i in params.items)
