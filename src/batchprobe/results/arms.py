"""One arm (or sweep step): its spec, its sessions, its metrics, its comparison."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from batchprobe.client.types import ErrorKind, RequestError
from batchprobe.results.client import ClientHealth
from batchprobe.results.pool import PoolPressure
from batchprobe.results.sessions import SessionResult, Workload
from batchprobe.results.shapes import WaveResult


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class ArmSpec(_Model):
    """One arm: a server configuration (``mode``, None for a plain URL) and a concurrency."""

    name: str
    concurrency: int = Field(ge=1)
    mode: Literal["simple", "batching"] | None = None
    prefix_cache: bool = Field(
        default=False,
        description="A managed engine launched with its default prefix cache (for the repeat wave).",
    )
    depth: int | None = Field(
        default=None, description="The sweep step this arm belongs to (sweep@N, references@N)."
    )
    role: Literal["arm", "step", "reference", "pressure", "replay"] = Field(
        default="arm",
        description="arm: a planned arm; step: a sweep step (all its shapes in one wave); "
        "reference: a serial pass whose sessions are references, like the baseline's; "
        "pressure: the wave past the KV pool, after the sweep; replay: a reproducer's case "
        "sent as its wave sent it (`run --replay`, `repro`), at any depth.",
    )
    kv_tokens: int | None = Field(
        default=None, description="A managed engine launched with a KV pool of this many tokens."
    )


class Distribution(_Model):
    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float


class ArmMetrics(_Model):
    sessions: int
    ok_sessions: int
    errors_by_kind: dict[ErrorKind, int] = Field(default_factory=dict)
    recall: float | None = Field(default=None, description="hits / recall sessions that answered")
    recall_hits: int = 0
    recall_sessions: int = 0
    cross_talk_sessions: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int | None = Field(
        default=None, description="Sum of usage.prompt_tokens_details.cached_tokens when reported."
    )
    decode_tokens_per_s: float | None = Field(
        default=None,
        description="decode workload: tokens after each first token / union of decode windows",
    )
    recall_decode_tokens_per_s: float | None = None
    aggregate_decode_tokens_per_s: float | None = Field(
        default=None,
        description="every session of every shape: tokens after each first / union of windows",
    )
    per_session_decode_tokens_per_s: float | None = Field(
        default=None, description="median of each session's own decode rate (every shape)"
    )
    output_tokens_per_s: float | None = Field(
        default=None, description="completion tokens / wall_s: everything the arm generated, all in"
    )
    timed_shapes: Literal["burst", "all"] = Field(
        default="burst",
        description="Which sessions the TTFT/ITL/e2e distributions cover: the burst wave "
        "(arms), or every shape (sweep steps, whose mixed wave shares the server). Decode and "
        "prefill rates always come from the burst.",
    )
    prefill_tokens_per_s: float | None = Field(
        default=None, description="recall workload: prompt tokens / union of prefill windows"
    )
    ttft_s: Distribution | None = None
    itl_s: Distribution | None = None
    e2e_s: Distribution | None = None
    buffered_sessions: int = 0
    wall_s: float = 0.0


class CapacityCheck(_Model):
    """Whether the requests its clients dropped stopped running: the server's own count of
    running requests against the client's requests in flight, sampled through the step, then
    until the server ran none."""

    source: str = Field(description="Where the running count came from (a /metrics gauge, /slots).")
    hung_up: int = Field(description="Streams the client hung up in the step.")
    samples: int
    excess_s: float = Field(
        description="The longest stretch in which the server ran more requests than the "
        "client had open (seconds)."
    )
    excess_max: int = Field(description="The most requests the server ran beyond those open.")
    drained_s: float | None = Field(
        description="After the step's last request ended, how long until the server ran none; "
        "None: it still ran some at the deadline."
    )
    deadline_s: float


class ArmResult(_Model):
    spec: ArmSpec
    state: Literal["pending", "running", "done", "failed", "interrupted"] = "pending"
    started_at: str | None = None
    sessions: list[SessionResult] = Field(default_factory=list)
    metrics: ArmMetrics | None = None
    server_alive_after: bool | None = None
    capacity: CapacityCheck | None = Field(
        default=None, description="A step with client aborts: did the dropped requests stop?"
    )
    pressure: PoolPressure | None = Field(
        default=None, description="The pressure wave: the pool, and what it put in flight."
    )
    engine_version: str | None = None
    served_model: str | None = None
    log_path: str | None = Field(default=None, description="The engine's log for this arm.")
    waves: list[WaveResult] = Field(
        default_factory=list, description="One per shape, in order (serial arms: one per shape too)."
    )
    engine_pid: int | None = Field(default=None, description="The managed engine's pid.")
    engine_pgid: int | None = Field(default=None, description="The managed engine's process group.")
    engine_launch: str | None = Field(
        default=None,
        description="The launch token: every process of the launch has BATCHPROBE_LAUNCH=<it> "
        "in its environment (see `batchprobe engines doctor`).",
    )
    engine_exit_code: int | None = Field(
        default=None,
        description="The managed engine's exit status if it exited during the arm "
        "(negative: killed by that signal).",
    )
    request_body: dict[str, JsonValue] | None = Field(
        default=None,
        description="The exact JSON body of one measured request of this arm (what the server saw).",
    )
    error: str | None = Field(default=None, description="An error of the arm itself.")
    warm_up_error: RequestError | None = Field(
        default=None,
        description="The unmeasured warm-up request before the arm (or, in a sweep, before its "
        "first step) failed: an error of the arm, as any failed request is.",
    )
    replays: list[SessionResult] = Field(
        default_factory=list,
        description="Wrong answers with only their own content, replayed in their whole wave "
        "(same requests, same depth, same traffic): one that comes back is a failure, one that "
        "does not is a numerics flip. Every request of each replayed wave is here.",
    )
    serial_replays: list[SessionResult] = Field(
        default_factory=list,
        description="A sample of serial references sent alone again: the serial flip rate the "
        "replays' flip rate is held against.",
    )
    warnings: list[str] = Field(default_factory=list)
    client: ClientHealth | None = Field(
        default=None, description="The client's processes, connections and loop lag in this arm."
    )


class Divergence(_Model):
    workload: Workload
    session: int
    index: int = Field(description="Index of the first differing chunk.")
    baseline: str | None
    arm: str | None


class ArmComparison(_Model):
    arm: str
    baseline: str
    decode_speedup: float | None = None
    scaling_efficiency: float | None = Field(default=None, description="speedup / concurrency")
    prefill_speedup: float | None = None
    recall_delta: float | None = Field(default=None, description="arm recall - baseline recall")
    greedy_compared: int = 0
    greedy_matches: int = 0
    greedy_match_rate: float | None = None
    divergences: list[Divergence] = Field(default_factory=list)
    max_logprob_delta: float | None = Field(
        default=None,
        description="Largest |logprob difference| over the tokens both arms generated alike.",
    )

    def divergence(self, workload: Workload, session: int) -> Divergence | None:
        """The first difference of this session's greedy output from the baseline's, if any."""
        return next(
            (d for d in self.divergences if d.workload == workload and d.session == session), None
        )
