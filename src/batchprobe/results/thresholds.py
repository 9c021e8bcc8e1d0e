"""Decision thresholds, with the reasoning behind each default."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    min_speedup: float = Field(
        default=1.5,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Aggregate decode speedup over the baseline arm needed to call batching parallel. "
            "A serial engine that time-slices shows ~1.0x; measured continuous batching on a 2-core "
            "CPU reaches ~2x at 8 streams and GPUs far more, so 1.5x separates them with margin "
            "for noise."
        ),
    )
    speedup_resolution: float = Field(
        default=0.05,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "The narrowest a speedup's interval is ever taken to be, relative, either side of "
            "its median: pairs taken minutes apart on one server agree this closely at best, "
            "so a median within 5% of --min-speedup is INCONCLUSIVE however tight its pairs."
        ),
    )
    throughput_drop: float = Field(
        default=0.10,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "The server's history: the deepest depth's pairs taken again after the sweep's "
            "mixed waves, whose interval lies wholly below the first one's and whose median is "
            "this much (relative) below, is a soft finding with both figures."
        ),
    )
    abort_grace_s: float = Field(
        default=5.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "A server may run a request its client dropped for this long (it notices the "
            "hang-up at its next write, after a batch with a long prefill in it); running more "
            "requests than the client has open for longer is a soft abort_ignored finding."
        ),
    )
    recall_floor: float = Field(
        default=0.75,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "Baseline recall below this makes recall uninformative (the model cannot do the task "
            "even alone): the verdict is INCONCLUSIVE on recall and suggests a shorter haystack."
        ),
    )
    replays: int = Field(
        default=3,
        ge=1,
        le=10,
        description=(
            "How often a wrong answer with only its own content is replayed in its whole wave. "
            "Wrong again in any replay: a failure; right in every one: a numerics flip (soft)."
        ),
    )
    max_flip_rate: float = Field(
        default=0.10,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "Flips over judged answers above this, and above 3x the serial replays' own rate, "
            "with 2 or more flips, is a failure: numerics do not flip one answer in ten."
        ),
    )
    near_tie_nats: float = Field(
        default=0.5,
        ge=0,
        le=5,
        allow_inf_nan=False,
        description=(
            "A wrong answer that parts from its serial reference at a token the reference "
            "listed within this many nats of the token it chose is a numerics flip (soft) even "
            "when its replays go wrong too: a different batch, prefill split or cached prefix "
            "moves a logprob by hundredths of a nat, and near a tie that decides the answer "
            "(the references ask for top logprobs where the server returns them). 0: never."
        ),
    )
    length_slack: int = Field(
        default=2,
        ge=0,
        le=64,
        description=(
            "Tokens a reply may fall short of its max_tokens (when its serial reference reached "
            "it) or differ from its reference's usage: engines hold back a token at a stop-string "
            "boundary or stream two tokens in one chunk."
        ),
    )
    divergence_p: float = Field(
        default=0.01,
        gt=0,
        lt=1,
        allow_inf_nan=False,
        description=(
            "Without logprobs: greedy rows beside sampled rows that diverge from serial more "
            "often than greedy rows beside greedy ones, at this one-sided Fisher p-value or "
            "below, were sampled: a failure."
        ),
    )
    strict_greedy: bool = Field(
        default=False,
        description=(
            "Fail when greedy outputs differ between arms. Off by default: divergence is expected "
            "numerics on engines that are not batch-invariant, so it is reported as a soft signal."
        ),
    )
    client_lag_ms: float = Field(
        default=2.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "A client process whose event loop's busy lag p99 is above this (its own work "
            "delaying a ready callback) timestamps tokens late by as much: the arm gets a warning "
            "and a sweep step's TTFT/ITL are not judged against the SLOs. One loop-iteration's "
            "worth of tokens at 256 streams costs about 1 ms; 2 ms is well below a GPU's ITL."
        ),
    )
    buffered_span_ms: float = Field(
        default=2.0,
        ge=0,
        allow_inf_nan=False,
        description=(
            "A stream whose tokens (4 or more) all arrive within this span was buffered by the "
            "server or a proxy; its session is timed end to end instead of per token."
        ),
    )
