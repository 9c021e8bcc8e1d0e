"""The fake server's shape triggers: each fires in its own wave's situation and in no other.

Every wave of the shapes contract runs against one fake server; a reply differing from
its reference (the body sent alone to a healthy fake) is a fault that fired. Each trigger must fire in its own wave, on the expected requests, and nowhere else.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import aiohttp
import pytest

from batchprobe.fake import FakeServerConfig, FakeServerThread, _state
from batchprobe.fake._requests import GenRequest, parse
from batchprobe.fake._tokens import CORRUPT_PIECE, VOCAB
from fake_traffic import (
    FORCED_ID,
    WAVES,
    Reply,
    all_bodies,
    counting,
    early_bodies,
    expected_count,
    join_wave,
    reference_name,
    serial,
    together,
)

# TTFT well above a burst's arrival spread on a loaded 2-core machine: a burst's requests
# all arrive before any first token, as the shapes contract's waves assume.
TIMING: dict[str, Any] = {"ttft_ms": 100.0, "itl_ms": 3.0}

Waves = dict[str, dict[str, Reply]]


def config(fault: str = "none", when: str = "always") -> FakeServerConfig:
    return FakeServerConfig(fault=fault, fault_when=when, **TIMING)  # type: ignore[arg-type]


async def _serial_arm(url: str) -> dict[str, Reply]:
    async with aiohttp.ClientSession() as session:
        return await serial(session, url, all_bodies())


async def _waves(url: str) -> Waves:
    async with aiohttp.ClientSession() as session:
        return {name: await wave(session, url) for name, wave in WAVES.items()}


def serial_arm(server_config: FakeServerConfig) -> dict[str, Reply]:
    """Every body sent alone. Timing cannot matter with nothing else in flight, so a
    zero-latency server gives the same replies as a slow one, in a fraction of the time."""
    fast = server_config.model_copy(update={"ttft_ms": 0.0, "itl_ms": 0.0})
    with FakeServerThread(fast) as server:
        return asyncio.run(_serial_arm(server.base_url))


@functools.cache
def references() -> dict[str, Reply]:
    """The healthy serial arm: what every reply of every wave must equal."""
    return serial_arm(config())


@functools.cache
def run_waves(server_config: FakeServerConfig) -> Waves:
    """Every wave against a fresh server (cached: several tests read one config's run)."""
    with FakeServerThread(server_config) as server:
        return asyncio.run(_waves(server.base_url))


def run_arms(server_config: FakeServerConfig) -> tuple[dict[str, Reply], Waves]:
    return references(), run_waves(server_config)


def broken(references: dict[str, Reply], waves: Waves) -> dict[str, list[str]]:
    """Per wave, the requests whose reply differs from their serial reference."""
    return {
        wave: sorted(
            name
            for name, reply in replies.items()
            if not reply.same_as(references[reference_name(name)])
        )
        for wave, replies in waves.items()
    }


def test_healthy_fake_answers_every_wave_like_its_serial_arm() -> None:
    references, waves = run_arms(config())
    assert broken(references, waves) == {wave: [] for wave in WAVES}
    bodies = all_bodies()
    for name, body in bodies.items():
        ref = references[name]
        assert ref.status == 200 and ref.done, name
        if name == "params-biased":
            assert set(ref.pieces) == {VOCAB[FORCED_ID]}
        elif "Counting" in body["prompt"]:  # a sampled count keeps counting too
            assert ref.text == expected_count(body), name  # the count, not just greedy text
        else:
            assert ref.text.strip().isdigit() and ref.text.strip() in body["prompt"], name


# The requests each trigger must break under a fault that changes every faulted reply.
EXPECTED = {
    "join": ["join-new0", "join-new1", "join-new2"],
    "ragged": ["ragged0", "ragged1", "ragged2", "ragged3"],
    "early": ["early1", "early2", "early3"],
    "repeat": [
        "repeat-again-2",
        "repeat-prefix-a",
        "repeat-prefix-b",
        "repeat-twice",
        "repeat-twice-2",
    ],
    "params": [
        "params-biased",
        "params-greedy",
        "params-penalty",
        "params-sampled",
        "params-stop",
    ],
}


@pytest.mark.parametrize(
    ("trigger", "fault"),
    [(trigger, "corrupt") for trigger in WAVES if trigger != "burst"] + [("params", "param_leak")],
)
def test_no_trigger_fires_in_the_serial_arm(trigger: str, fault: str) -> None:
    alone = serial_arm(config(fault, trigger))
    assert [name for name, reply in alone.items() if not reply.same_as(references()[name])] == []


@pytest.mark.parametrize("trigger", list(EXPECTED))
def test_corrupt_fires_in_its_own_wave_only(trigger: str) -> None:
    references, waves = run_arms(config("corrupt", trigger))
    expected = {wave: EXPECTED[trigger] if wave == trigger else [] for wave in WAVES}
    assert broken(references, waves) == expected


@pytest.mark.parametrize(
    ("trigger", "fault"),
    [
        ("join", "finish_error"),
        ("ragged", "cross_talk"),
        ("early", "finish_error"),
        ("early", "truncated_stream"),
        ("repeat", "cross_talk"),
        ("params", "bias_leak"),
        ("params", "http_500"),
    ],
)
def test_other_faults_fire_in_their_trigger_wave_only(trigger: str, fault: str) -> None:
    references, waves = run_arms(config(fault, trigger))
    found = broken(references, waves)
    assert found[trigger]
    assert set(found[trigger]) <= set(EXPECTED[trigger])
    assert {wave: names for wave, names in found.items() if wave != trigger} == {
        wave: [] for wave in WAVES if wave != trigger
    }


def test_cross_talk_under_ragged_answers_with_a_peer_code() -> None:
    _, waves = run_arms(config("cross_talk", "ragged"))
    bodies = all_bodies()
    answers = {name: reply.text.strip() for name, reply in waves["ragged"].items()}
    for name, answer in answers.items():
        assert answer not in bodies[name]["prompt"]
        assert any(answer in bodies[peer]["prompt"] for peer in answers)


def test_early_corrupts_only_the_tokens_after_the_departure() -> None:
    _, waves = run_arms(config("corrupt", "early"))
    bodies = early_bodies()
    shortest = waves["early"]["early0"]
    assert shortest.text == expected_count(bodies["early0"])
    for name in ("early1", "early2", "early3"):
        pieces = waves["early"][name].pieces
        clean = next(i for i, piece in enumerate(pieces) if CORRUPT_PIECE in piece)
        # Where depends on how far each survivor's own clock (started at its arrival) had
        # gone when the shortest left: a clean count up to there, then only bad tokens.
        assert expected_count(bodies[name]).startswith("".join(pieces[:clean]))
        assert all(piece == f" {CORRUPT_PIECE}" for piece in pieces[clean:])
        assert len(pieces) == bodies[name]["max_tokens"]


def test_early_finish_error_ends_survivors_at_the_departure() -> None:
    _, waves = run_arms(config("finish_error", "early"))
    for name in ("early1", "early2", "early3"):
        reply = waves["early"][name]
        assert reply.finish_reason == "error"
        assert reply.done
        assert len(reply.pieces) < early_bodies()[name]["max_tokens"], reply.pieces


def test_early_does_not_fire_on_the_joiners_of_a_join_wave() -> None:
    # The running ones finish first, the joiners go on: a join wave has departures too,
    # but of requests that were decoding when the joiners came.
    references, waves = run_arms(config("corrupt", "early"))
    assert broken(references, {"join": waves["join"]}) == {"join": []}


def test_join_does_not_fire_on_a_repeated_joiner() -> None:
    repeated = {"join-again": counting(200, 2000, 48)}  # join-run0's body, sent again
    fresh = {"join-fresh": counting(220, 2200, 48)}

    async def go(url: str) -> tuple[dict[str, Reply], dict[str, Reply]]:
        async with aiohttp.ClientSession() as session:
            again = await join_wave(session, url, joiners=repeated)
            new = await join_wave(session, url, joiners=fresh)
        return again, new

    with FakeServerThread(config("corrupt", "join")) as server:
        again, new = asyncio.run(go(server.base_url))
    assert again["join-again"].text == expected_count(repeated["join-again"])
    assert new["join-fresh"].text != expected_count(fresh["join-fresh"])
    assert CORRUPT_PIECE in new["join-fresh"].text


def test_repeat_does_not_fire_on_a_burst_after_a_serial_arm_of_the_same_prompts() -> None:
    bodies = {f"s{i}": counting(700 + i, 7000 + 100 * i, 8) for i in range(4)}

    async def go(url: str) -> tuple[dict[str, Reply], dict[str, Reply]]:
        async with aiohttp.ClientSession() as session:
            alone = await serial(session, url, bodies)
            return alone, await together(session, url, bodies)

    with FakeServerThread(config("corrupt", "repeat")) as server:
        alone, burst = asyncio.run(go(server.base_url))
    for name, body in bodies.items():
        assert alone[name].text == burst[name].text == expected_count(body)


@pytest.mark.slow
def test_a_thousand_streams_of_unique_prompts_set_off_no_repeat() -> None:
    # The costliest check (prefix comparisons over the busy period) at the probe's
    # largest concurrency: a burst of distinct prompts is no repeat, however many.
    bodies = {f"b{i}": counting(800 + i, 10 * i, 16) for i in range(1024)}

    async def go(url: str) -> dict[str, Reply]:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            return await together(session, url, bodies)

    fast = FakeServerConfig(ttft_ms=0, itl_ms=0, fault="corrupt", fault_when="repeat")
    with FakeServerThread(fast) as server:
        replies = asyncio.run(go(server.base_url))
    assert all(replies[name].text == expected_count(body) for name, body in bodies.items())


def test_params_counts_an_omitted_parameter_as_its_neutral_value() -> None:
    bodies = {
        "plain": counting(900, 9000, 8),
        "neutral": counting(901, 9100, 8, temperature=0.0, top_p=1.0, logit_bias={}),
        "biased": counting(902, 9200, 8, logit_bias={FORCED_ID: 100}),
    }

    async def go(url: str, names: list[str]) -> dict[str, Reply]:
        async with aiohttp.ClientSession() as session:
            return await together(session, url, {name: bodies[name] for name in names})

    with FakeServerThread(config("corrupt", "params")) as server:
        alike = asyncio.run(go(server.base_url, ["plain", "neutral"]))
        mixed = asyncio.run(go(server.base_url, ["plain", "neutral", "biased"]))
    assert all(alike[name].text == expected_count(bodies[name]) for name in alike)
    assert all(CORRUPT_PIECE in mixed[name].text for name in ("plain", "neutral"))


def test_a_busy_period_that_never_ends_forgets_its_oldest_finished_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_state, "PERIOD_LIMIT", 4)
    state = _state.ServerState(FakeServerConfig(fault="corrupt", fault_when="repeat"))

    def gen(prompt: str) -> GenRequest:
        return parse("completions", json.dumps({"prompt": prompt}).encode())

    def is_repeat(prompt: str) -> bool:
        with state.track(gen(prompt), None, 1) as flight:
            return state.fault_applies(flight)

    with state.track(gen("the long one, in flight all along"), None, 1):
        for i in range(10):
            assert not is_repeat(f"prompt number {i} of the soak")
        assert is_repeat("the long one, in flight all along")  # in flight: kept
        assert is_repeat("prompt number 9 of the soak")  # recent: kept
        assert not is_repeat("prompt number 0 of the soak")  # old and finished: forgotten
