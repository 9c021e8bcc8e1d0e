"""Verdict models for traffic shapes: each request's situation, its self-check, each wave."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from batchprobe.results.pool import PoolPressure

CheckKind = Literal["recall", "count", "bias", "stop", "constraint", "choices"]
# Departures recorded per request: enough for any shape's wave (early's are a handful); a
# sweep step 1,024 deep would otherwise record a million.
MAX_DEPARTURES = 8


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class SelfCheck(_Model):
    """What the item's own checker said about this answer (no reference needed)."""

    kind: CheckKind
    passed: bool
    token: int | None = Field(default=None, description="Index of the first chunk that broke it.")
    detail: str | None = Field(default=None, description="What broke, e.g. \"count broke at token 3 ('!!!!')\".")


class Departure(_Model):
    """Another request of the wave finished while this one was in flight."""

    session: int
    at_token: int = Field(description="Chunks this request had streamed when the other one left.")
    in_flight: int = Field(description="Requests still in flight after it left.")


class SentAfter(_Model):
    """What a request of a wave waited for before it went out (its shape's join trigger)."""

    kind: Literal["tokens", "finish", "start"] = Field(
        description="tokens: each of sessions had streamed tokens chunks (or ended); finish: "
        "the session's first send ended; start: it went out."
    )
    sessions: list[int]
    tokens: int | None = Field(default=None, description="tokens: the chunks each had streamed.")


class Situation(_Model):
    """Where a request stood in its wave: what a failure is read against."""

    shape: str
    api: Literal["completions", "chat"]
    copy_index: int = Field(default=0, description="repeat: 0 first send, 1 and on the same item again")
    arrival_s: float = Field(description="Seconds after its wave started.")
    phase: int = Field(
        default=0, description="Its phase in its shape's wave: a phase starts once the one "
        "before has ended."
    )
    after: SentAfter | None = Field(
        default=None, description="The trigger it waited for, within its phase."
    )
    delay_s: float = Field(default=0.0, description="How long after its trigger it went out.")
    in_flight_at_arrival: int = Field(description="Other requests of the arm in flight, decoding or not.")
    decoding_at_arrival: int = Field(description="Of those, how many had streamed a token.")
    departures: list[Departure] = Field(
        default_factory=list,
        description=f"Requests that finished while this one ran, the first {MAX_DEPARTURES}.",
    )
    more_departures: int = Field(default=0, description="Departures past the first ones, counted.")
    max_tokens: int
    params: str = Field(description="Sampling parameters in words ('greedy', 'temperature 0.9').")
    sampled: bool = Field(default=False, description="temperature > 0: no greedy reference.")
    bias_text: str | None = Field(default=None, description="What its logit bias forces.")
    stop: list[str] = Field(default_factory=list, description="Its own stop strings.")
    constraint: Literal["json_schema", "grammar"] | None = Field(
        default=None, description="params: what fixed its output (a JSON schema, a grammar)."
    )
    choices: int | None = Field(
        default=None, description="params: the choices it asked for in one request (n > 1)."
    )
    role: str | None = Field(default=None, description="Its role in its shape (params: greedy, ...).")
    prefix_cache: bool = Field(description="Sent with the server's prefix cache as users run it.")
    conversation: int | None = Field(
        default=None, description="conversation: the session of its conversation's first turn."
    )
    turn: int | None = Field(default=None, description="conversation: its turn, 1 for the first.")
    nonce: str | None = Field(
        default=None,
        description="A reference sent to a URL after the sweep: the run id in its prompt was "
        "this fresh nonce, so no prefix cache of the sweep could serve it (cold).",
    )
    waiting_at_hang_up: list[int] | None = Field(
        default=None,
        description="aborts: a stream the client hung up: the sessions of its wave that were "
        "sent and still waited for their first token at that moment (in prefill or queued).",
    )


class WaveResult(_Model):
    """One shape's wave in one arm."""

    shape: str
    sessions: list[int]
    requests: int
    wall_s: float
    prefix_cache: str = Field(description="How the prefix cache stood for this wave, in words.")
    cached_prompt_tokens: int | None = Field(
        default=None, description="Sum of the cached prompt tokens the server reported."
    )
    notes: list[str] = Field(default_factory=list)


class ShapeStatus(_Model):
    """Whether a shape ran, and why not."""

    shape: str
    ran: bool
    reason: str | None = None
    sessions: list[int] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="e.g. how ragged met the window.")


class Situations(_Model):
    """What the run made happen beyond plain traffic: where this year's batching bugs live."""

    aborts: int = Field(default=0, description="Streams the client hung up mid-reply.")
    aborts_while_waiting: int = Field(
        default=0,
        description="Of those, hung up while another request of the wave waited for its "
        "first token (in prefill, or queued).",
    )
    retries: int = Field(default=0, description="Dropped prompts sent again after the hang-up.")
    constrained: int = Field(
        default=0, description="Rows sent under a JSON schema or a grammar beside other rows."
    )
    choice_rows: int = Field(
        default=0, description="Rows asking for several choices (n) in one request."
    )
    capacity_checked: int = Field(
        default=0,
        description="Steps whose server running count was read against the client's requests "
        "in flight (did the dropped requests stop?).",
    )
    not_checked: list[str] = Field(
        default_factory=list, description="Situations made but not checked, and why."
    )
    kv_pressure: PoolPressure | None = Field(
        default=None, description="The wave past the KV pool: the pool and the peak in flight."
    )
    kv_not_run: str | None = Field(
        default=None, description="Why no wave filled the KV pool (None when one ran)."
    )

    def describe(self) -> str:
        return f"{self._aborts()}; {self._rows()}; {self._pool()}"

    def _rows(self) -> str:
        return (f"{self.constrained} constrained row(s) and {self.choice_rows} row(s) asking "
                "for several choices beside other rows")

    def _pool(self) -> str:
        p = self.kv_pressure
        if p is None:
            return f"no wave filled the KV pool ({self.kv_not_run or 'not planned'})"
        held = (f", the replies held at most {p.peak_tokens} at once"
                if p.peak_tokens is not None else "")
        assumed = f"; {p.pool.assumption}" if p.pool.assumption else ""
        pre = f", {p.preemptions} preemption(s) counted" if p.preemptions else ""
        return (f"KV pool of {p.pool.tokens} tokens ({p.pool.source}{assumed}): {p.requests} "
                f"requests asked for {p.planned_tokens} at once ({p.asked:.0%} of it){held}"
                f"{pre}; the request larger than the pool was {p.oversize}")

    def _aborts(self) -> str:
        if not self.aborts:
            return "situations: no client abort was made"
        checked = (f"; capacity read against the client in {self.capacity_checked} step(s)"
                   if self.capacity_checked else "")
        return (f"situations: {self.aborts} client abort(s) ({self.aborts_while_waiting} while "
                f"another request waited for its first token), {self.retries} retried"
                f"{checked}" + "".join(f"; {n}" for n in self.not_checked))
