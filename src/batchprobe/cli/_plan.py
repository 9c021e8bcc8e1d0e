"""What the progress listeners share about a run: its plan (requests, tokens), the requests
done, the phase it is in, its clock, and the one estimate of the time left."""

from __future__ import annotations

from collections.abc import Callable

from batchprobe.probe.state import PlanSummary
from batchprobe.results.models import ArmResult, RunConfig


def plan_line(summary: PlanSummary) -> str:
    return (f"plan: {summary.requests} requests, ~{summary.prompt_tokens} prompt tokens, up "
            f"to {summary.decode_tokens} decode tokens (the references the judge asks for "
            "come after, counted as they go)")


def clock_text(seconds: float) -> str:
    whole = max(int(seconds), 0)
    return f"{whole // 60}:{whole % 60:02d}"


def _serial_rates(arm: ArmResult) -> tuple[float, float] | None:
    """An arm's prefill and decode rates in tokens/s, from requests sent one at a time: the
    prompt over the time to the first token, the tokens after it over the time after it."""
    prefill_s = decode_s = 0.0
    prompt = decoded = 0
    for s in arm.sessions:
        if s.prompt_tokens and s.completion_tokens and s.first_token_s is not None \
                and s.last_token_s is not None:
            prefill_s += s.first_token_s - s.start_s
            decode_s += s.last_token_s - s.first_token_s
            prompt += s.prompt_tokens
            decoded += s.completion_tokens - 1
    if prefill_s <= 0 or decode_s <= 0 or decoded <= 0:
        return None
    return prompt / prefill_s, decoded / decode_s


class RunPlan:
    """What the listeners share: the plan, the requests done, the phase, the clock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.started = clock()
        self.depths: set[int] = set()
        self.planned_arms = 0
        self.arms_done = 0
        self.requests = 0  # planned: the plan's, then each phase's as it starts
        self.done = 0  # requests that came back
        self.wrong = 0  # answers the judge called wrong so far
        self.phase = "starting"
        self.bisecting = False
        self.first: tuple[str, float, int] | None = None  # the first arm: name, start, done
        self.estimated = False
        self.tokens = (0, 0)  # the plan's prompt tokens and most decode tokens

    def expect(self, config: RunConfig) -> None:
        self.depths = set(config.sweep or [])
        self.planned_arms = len(config.arms) + len(self.depths)

    def bisection_starts(self, arm: ArmResult) -> bool:
        """True once: the first sweep step at a depth the plan did not list."""
        first = (arm.spec.role == "step" and bool(self.depths)
                 and arm.spec.concurrency not in self.depths and not self.bisecting)
        self.bisecting = self.bisecting or first
        return first

    def planned(self, summary: PlanSummary) -> str:
        """The plan's line, its requests counted."""
        self.requests += summary.requests
        self.tokens = (self.tokens[0] + summary.prompt_tokens,
                       self.tokens[1] + summary.decode_tokens)
        return plan_line(summary)

    def entered(self, name: str, requests: int) -> str:
        """A phase's line, its requests counted."""
        self.phase = name
        self.requests += requests
        return f"{name}: {requests} requests" if requests else name

    def started_arm(self, arm: ArmResult) -> None:
        if arm.spec.role != "reference":
            self.phase = f"{arm.spec.name} (N={arm.spec.concurrency})"
        if self.first is None and arm.spec.role != "reference":
            self.first = (arm.spec.name, self.clock(), self.done)

    def estimate(self, arm: ArmResult) -> str | None:
        """Once, as the first arm ends: the time left for the rest of the plan's tokens at
        its one-at-a-time prefill and decode rates (batching only takes less), or at its rate
        of requests where it ran several at once or its tokens were not counted."""
        if self.estimated or self.first is None or self.first[0] != arm.spec.name:
            return None
        self.estimated = True
        _, began, before = self.first
        spent, ran = self.clock() - began, self.done - before
        left = self.requests - self.done
        if spent <= 0 or ran <= 0 or left <= 0:
            return None
        rates = _serial_rates(arm) if arm.spec.concurrency == 1 else None
        if rates is None or not all(self.tokens):
            rate = ran / spent
            return (f"estimate: about {clock_text(left / rate)} left for {left} more requests "
                    f"(at the first arm's {rate:.1f} requests/s; the references come after)")
        prefill, decode = rates
        prompt_left = max(self.tokens[0] - sum(s.prompt_tokens or 0 for s in arm.sessions), 0)
        decode_left = max(self.tokens[1] - sum(s.completion_tokens or 0 for s in arm.sessions), 0)
        seconds = prompt_left / prefill + decode_left / decode
        return (f"estimate: at most about {clock_text(seconds)} left for {left} more requests "
                f"(their tokens at the first arm's one-at-a-time {prefill:.0f} prompt and "
                f"{decode:.1f} decode tokens/s; batching takes less; the references come after)")

    def elapsed(self) -> str:
        return clock_text(self.clock() - self.started)

    def heartbeat(self) -> str:
        planned = max(self.requests, self.done)
        return f"… {self.phase}: {self.done}/{planned} requests done, {self.elapsed()} elapsed"
