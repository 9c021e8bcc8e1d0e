"""The fake server's configuration: one validated model, shared by the library and the CLI."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

Batching = Literal["continuous", "serial"]
Fault = Literal[
    "none",
    "http_500",
    "finish_error",
    "cross_talk",
    "corrupt",
    "busy_503",
    # Client-hardening faults: a request read then dropped, a runaway stream, one huge event.
    "drop_after_read",
    "ignore_max_tokens",
    "huge_event",
    "exit_after",
    "stall",
    "hang",
    "malformed_sse",
    "truncated_stream",
    # Streams damaged under batching: deltas dropped (usage and finish right), a stream
    # ended with no finish_reason and no [DONE] (see the README's fake-server section).
    "drop_deltas",
    "cut_stream",
    "buffered",
    "param_leak",
    # Bugs of one row run with another row's request (see the README's fake-server section).
    "bias_leak",
    "max_tokens_leak",
    "stop_leak",
    # A row run with the stop strings of every row in flight beside it, its own too (what
    # llama.cpp + Gemma 3 passed before), and one run with another row's penalties.
    "stop_shared",
    "penalty_leak",
    # A row decoded under the JSON schema or grammar of a row in flight beside it.
    "constraint_leak",
    # The further choices of a request asking for several (n) given another's such request.
    "n_override",
    "usage_leak",
    "clean_stop",
    "wrong_resend",
    "flip_once",
    # Conversation bugs of a prefix cache (they need prefix_cache: a cold request is spared).
    "conversation_leak",
    "stale_turn",
    # Client-abort bugs, each only once a client hangs up mid-stream (fault_when aside):
    # later requests answered with the dropped one's prompt; every generation stopped when
    # the drop came while another request waited for its first token; the dropped request
    # generated on to its max_tokens; or its slot held for good.
    "abort_leak",
    "abort_wedge",
    "abort_ignored",
    "abort_held",
    # KV-pool bugs, each only once the pool (kv_tokens) is full or too small for a request
    # (see fake._pool): every running request errored; the youngest preempted and repeating
    # tokens once resumed; a request larger than the pool left waiting for ever.
    "pool_error",
    "preempt_repeat",
    "oversize_hang",
]
FaultWhen = Literal[
    "always", "concurrent", "above", "join", "ragged", "early", "repeat", "params", "warmup",
    "crowd",
]
# The faults the early trigger can apply mid-reply, from the departure on (the others need
# the whole reply still ahead: a status code, a first chunk, another row's parameters).
LateFault = Literal["corrupt", "finish_error", "truncated_stream", "clean_stop"]
LogprobsFormat = Literal["openai", "llama_cpp", "none"]
# Requests in flight, at least, that the crowd trigger needs.
CROWD = 3
# What a warm-up request's prompt starts with (batchprobe.send.arm's side requests).
WARMUP_PREFIX = "[warm-up"
LATE_FAULTS: tuple[str, ...] = LateFault.__args__  # type: ignore[attr-defined]

# The faults that count answered requests (exit_after).
_COUNTED = ("exit_after", "stall")

# The faults a client's hang-up sets off (fake._state.ServerState.client_gone).
ABORT_FAULTS: tuple[str, ...] = ("abort_leak", "abort_wedge", "abort_ignored", "abort_held")

# The faults of a full KV pool: they need kv_tokens (fake._pool).
POOL_FAULTS: tuple[str, ...] = ("pool_error", "preempt_repeat", "oversize_hang")

# The faults that answer a conversation turn from the wrong cached prompt (fake._turns).
TURN_FAULTS: tuple[str, ...] = ("conversation_leak", "stale_turn")

BATCHING_MODES: tuple[str, ...] = Batching.__args__  # type: ignore[attr-defined]
LOGPROBS_FORMATS: tuple[str, ...] = LogprobsFormat.__args__  # type: ignore[attr-defined]
FAULT_MODES: tuple[str, ...] = Fault.__args__  # type: ignore[attr-defined]
FAULT_WHEN_MODES: tuple[str, ...] = FaultWhen.__args__  # type: ignore[attr-defined]


class FakeServerConfig(BaseModel):
    """How the fake OpenAI-compatible server behaves: latency, batching, one fault mode."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    model_id: str = Field(default="fake-model", min_length=1)
    """The id served by ``GET /v1/models`` and echoed in every reply."""

    ttft_ms: float = Field(default=50.0, ge=0.0)
    """Time to first token (prefill), counted from when the request gets a generation slot."""

    itl_ms: float = Field(default=10.0, ge=0.0)
    """Inter-token latency of one request generating alone."""

    jitter_ms: float = Field(default=0.0, ge=0.0)
    """Each token's due time moves by a seeded uniform offset in [-jitter, +jitter]; offsets
    do not accumulate, so medians keep matching ``ttft_ms`` and ``itl_ms``."""

    batching: Batching = "continuous"
    """``serial``: one request generates at a time, the rest queue (no aggregate gain).
    ``continuous``: up to ``batch_cap`` requests generate together."""

    batch_cap: int = Field(default=64, ge=1)
    """Continuous batching only: requests beyond this many wait for a free slot."""

    slowdown: float = Field(default=0.0, ge=0.0)
    """Continuous batching only: the per-token step is ``itl * (1 + slowdown * (active - 1))``
    with ``active`` requests generating; 0 is perfect scaling, 1 is no aggregate gain."""

    degrade_after: int | None = Field(default=None, ge=1)
    """After this many generation requests received, continuous batching gains nothing any
    more: the step is ``itl * active`` (as ``slowdown`` 1), as an engine its own history
    left slow."""

    prefix_cache: bool = False
    """Simulate a prompt cache: a prompt seen before reports all its prompt tokens cached and
    gets a tenth of the TTFT, unless the request says ``"cache_prompt": false``. Also serves a
    llama.cpp-like ``GET /props`` so clients can detect the per-request switch."""

    close_after_stream: bool = False
    """Close the connection after every streamed reply, without a ``Connection: close`` header
    and without reading what the client wrote meanwhile, as llama-server does: a client that
    reuses kept-alive connections races that close."""

    tokens_per_delta: int = Field(default=1, ge=1, le=64)
    """Healthy coalescing: a streamed delta carries the text (and logprobs) of up to this many
    tokens (the first token alone), as vLLM's ``--stream-interval`` does; usage still counts
    every token. With ``fault="drop_deltas"`` the interval whose other tokens are dropped."""

    fault: Fault = "none"
    """One fault or bug mode to inject (``none`` for a healthy server)."""

    fault_when: FaultWhen = "always"
    """``always``, or ``concurrent``: only requests that shared the server with another one
    (one in flight when it arrived, or one arriving before its first token). Decided when the
    first token is due. Ignored by ``busy_503`` (concurrent by nature) and ``exit_after``.

    ``above``: only requests that arrive while more than ``fault_above`` requests, the
    arriving one included, are in flight at the server (received, reply not yet complete).
    Decided on arrival. A reply stops counting before its last bytes are written, so a
    client that keeps at most ``fault_above`` requests in flight (the next one sent once it
    has read the previous one's end) never sets it off.

    The shape triggers fire each in its own situation only (see the README): ``join`` (it
    arrived while another in flight had streamed a token, and is not a repeat), ``ragged``
    (the prompts in flight when it arrived or when its first token is due span more than 2x
    in length), ``early`` (the tokens after a request that was not decoding yet when it
    arrived left with fewer tokens; only with corrupt, finish_error, truncated_stream or
    clean_stop),
    ``repeat`` (its prompt equals, or shares an 80% prefix with, another of the busy period)
    and ``params`` (another in flight has other sampling parameters). ``warmup``: only
    requests whose prompt starts with ``[warm-up`` (the probe's warm-up requests).
    ``crowd``: only requests that arrive while at least ``CROWD`` requests, the arriving one
    included, are in flight, and their prompts span more than 2x in length (one is longer
    than the rest): the smallest wave that sets it off is three requests."""

    fault_every: int = Field(default=1, ge=1)
    """The fault fires only on every ``fault_every``-th sending of the same prompt (its run
    id aside, where a replay may put a fresh nonce): a wave replayed ``fault_every`` times
    shows it once (a flaky failure)."""

    fault_above: int = Field(default=1, ge=0)
    """With ``fault_when="above"``: the fault hits requests that arrive while more than this
    many requests, counting the arriving one, are in flight at the server (0: every one).
    Ignored with the other ``fault_when`` values."""

    exit_after: int | None = Field(default=None, ge=1, validate_default=True)
    """With ``fault="exit_after"``: the server stops once this many generation requests have
    been answered. With ``fault="stall"``: from then on it keeps answering everything else
    (``/v1/models``, ``/health``) but never a generation request, as an engine whose worker
    thread died behind a live HTTP front (mlx-lm's)."""

    seed: int = 0
    """Seeds the latency jitter. Generated text depends only on the prompt."""

    logprobs_format: LogprobsFormat = "openai"
    """How logprobs asked for come back: ``openai`` (completions: ``tokens``,
    ``token_logprobs``, ``top_logprobs`` as ``[{token: logprob}]``; chat: ``content`` entries
    with ``top_logprobs`` lists), ``llama_cpp`` (completions too in the chat layout,
    ``logprobs.content[].top_logprobs``, as llama-server sends them) or ``none`` (never any:
    ``logprobs`` is null, as on servers that ignore the field)."""

    kv_tokens: int | None = Field(default=None, ge=16, le=10**9)
    """A KV pool of this many tokens shared by the requests in flight (each holds its prompt
    and the tokens it generated), stated in ``/props`` (``n_ctx``) and ``/metrics``
    (``vllm:cache_config_info``). Healthy, a request waits until its whole need fits and
    one that never can is refused with HTTP 400. None: no pool (memory is never short)."""

    serve_completions: bool = True
    """False: no ``/v1/completions`` (404 there), chat only, like transformers serve 4.56.2."""

    @field_validator("fault_when")
    @classmethod
    def _early_needs_a_late_fault(cls, value: FaultWhen, info: ValidationInfo) -> FaultWhen:
        fault = info.data.get("fault")
        if value == "early" and fault is not None and fault not in ("none", *LATE_FAULTS):
            allowed = ", ".join(LATE_FAULTS)
            raise ValueError(f"'early' faults a reply mid-way: fault must be one of {allowed}")
        return value

    @field_validator("fault")
    @classmethod
    def _turn_faults_need_the_cache(cls, value: Fault, info: ValidationInfo) -> Fault:
        if value in TURN_FAULTS and not info.data.get("prefix_cache"):
            raise ValueError(
                f"{value!r} answers from the prefix cache: needs prefix_cache true (--prefix-cache)"
            )
        return value

    @field_validator("kv_tokens")
    @classmethod
    def _pool_faults_need_a_pool(cls, value: int | None, info: ValidationInfo) -> int | None:
        fault = info.data.get("fault")
        if fault in POOL_FAULTS and value is None:
            raise ValueError(f"required (tokens, 16 or more) when fault is {fault!r}")
        return value

    @field_validator("exit_after")
    @classmethod
    def _exit_after_matches_fault(cls, value: int | None, info: ValidationInfo) -> int | None:
        fault = info.data.get("fault")
        if fault in _COUNTED and value is None:
            raise ValueError(f"required (an integer >= 1) when fault is {fault!r}")
        if value is not None and fault not in _COUNTED:
            raise ValueError(f"only allowed with fault 'exit_after' or 'stall', not {fault!r}")
        return value
