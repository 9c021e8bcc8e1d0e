"""What `batchprobe repro` writes: ``repro.py`` (standard library only), ``REPORT.md`` (ready to
paste into an issue) and ``repro.json`` (the minimal case as data)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchprobe.client._payload import PATHS, request_body
from batchprobe.files import write_atomic
from batchprobe.judge.references import references
from batchprobe.repro.case import ReproCase, ReproRequest
from batchprobe.repro.replay import reference_arm, repro_spec, send_context
from batchprobe.repro.shrink import Step
from batchprobe.results.bisect import BisectReport
from batchprobe.results.sessions import SessionResult
from batchprobe.send.replay import plans_for
from batchprobe.send.waves import request_for
from batchprobe.workload.shapes import AfterFinish, AfterStart, AfterTokens

_TEMPLATE = Path(__file__).with_name("_standalone.py")
_CASE_LINE = 'CASE: dict[str, Any] = json.loads("{}")  # batchprobe: the case'


@dataclass
class Outcome:
    """How the case fared: replays of the whole wave, the shrink, the final confirmation."""

    tries: int
    confirmed: int
    """Replays of the whole wave that showed the failure."""
    flaky: bool
    history: list[Step]
    final_failed: int
    evidence: SessionResult | None
    """The failing session's answer in a replay of the minimal case."""
    command: list[str] | None = None
    """The engine's command line, where repro launched it."""


def _expect(case: ReproCase, r: ReproRequest) -> dict[str, Any]:
    """What the judge would hold this answer to: its needle, its count, its length, where
    its serial reference did the task alone (else only its errors and other sessions'
    content: a model that cannot do the task is not judged on it)."""
    ref = references([reference_arm(case)]).passed.get(r.session)
    if ref is None:
        return {"code": None, "count": None, "length": False}
    item = r.item
    params = item.params
    plain = (params.greedy and not params.penalised and not params.stop
             and not params.logit_bias and params.constraint is None and not params.n)
    return {
        "code": item.expected_code if item.workload == "recall" else None,
        "count": item.count.model_dump() if item.count is not None and plain else None,
        "length": bool(plain and item.workload == "decode" and ref.finish_reason == "length"),
    }


def _expected(case: ReproCase, r: ReproRequest) -> str:
    """What the failing request should have answered, in words."""
    expect = _expect(case, r)
    said = []
    if expect["code"] is not None:
        said.append(f"its own needle's code `{expect['code']}` (planted in its prompt)")
    if r.item.count is not None and expect["count"] is not None:
        said.append(f"its count from {r.item.count.first}: `{r.item.count.ideal(4).strip()} ...`")
    if expect["length"]:
        said.append(f"all {r.item.max_tokens} tokens, as its serial reference ran")
    return "; ".join(said) or "what its serial reference answered, with no error"


def _schedule(requests: list[ReproRequest]) -> list[dict[str, Any]]:
    """When each request goes out, as a replay sends it (``replay.plans_for``): the requests
    of its shape's earlier phases that must have ended, the trigger it waits for (indices
    into the list), then its delay."""
    index = {(r.session, r.copy_index): i for i, r in enumerate(requests)}
    firsts = {r.session: i for i, r in enumerate(requests) if not r.copy_index}
    when: list[dict[str, Any]] = [{} for _ in requests]
    for plan in plans_for(requests):
        for x in plan.sends:
            earlier = [index[(y.item.session, y.copy_index)] for y in plan.sends
                       if y.phase < x.phase]
            after: dict[str, Any] | None = None
            if isinstance(x.after, AfterTokens):
                after = {"kind": "tokens", "requests": [firsts[s] for s in x.after.sessions],
                         "tokens": x.after.tokens}
            elif isinstance(x.after, (AfterFinish, AfterStart)):
                kind = "finish" if isinstance(x.after, AfterFinish) else "start"
                after = {"kind": kind, "requests": [firsts[x.after.session]], "tokens": 0}
            when[index[(x.item.session, x.copy_index)]] = {
                "phase_after": earlier, "after": after, "delay_s": x.delay_s}
    return when


def script_case(case: ReproCase, requests: list[ReproRequest], base_url: str | None) -> dict[str, Any]:
    """The data ``repro.py`` embeds: each request's exact body, path and offset, and what its
    answer must hold."""
    ctx, spec = send_context(case), repro_spec(case)
    sent = []
    sessions = [r.session for r in requests]
    when = _schedule(requests)
    for n, r in enumerate(requests):
        request = request_for(r.item, r.copy_index, spec, ctx, r.prefix_cache)
        text = r.item.prompt + "".join(m.content for m in r.item.history)
        turn = r.planned.turn if r.planned is not None else None
        # A later turn whose turn before is sent too: built from that one's answer.
        continues = turn.continues if turn is not None and turn.continues in sessions else None
        sent.append({
            "session": r.session,
            "path": PATHS[request.api],
            "body": request_body(request, case.target.model),
            **when[n],
            "continues": None if continues is None else sessions.index(continues),
            "tail": r.planned.prompt if continues is not None and r.planned is not None else None,
            "sent_codes": [c for c in case.planted.codes.values() if c in text],
            "expect": _expect(case, r),
        })
    return {
        "base_url": base_url,
        "model": case.target.model,
        "kept": case.kept.model_dump(mode="json"),
        "codes": {str(k): v for k, v in case.planted.codes.items()},
        "requests": sent,
    }


def script(data: dict[str, Any]) -> str:
    text = _TEMPLATE.read_text(encoding="utf-8")
    return text.replace(_CASE_LINE, f"CASE: dict[str, Any] = json.loads({json.dumps(data)!r})", 1)


def _when(requests: list[ReproRequest], when: dict[str, Any]) -> str:
    """When a request went out, in words."""
    said = []
    if when["phase_after"]:
        ended = sorted({requests[j].session for j in when["phase_after"]})
        said.append(f"once {', '.join(map(str, ended))} ended")
    after = when["after"]
    if after is not None:
        names = ", ".join(str(requests[j].session) for j in after["requests"])
        said.append({"tokens": f"once {names} streamed {after['tokens']} chunk(s)",
                     "finish": f"once {names} ended", "start": f"once {names} went out"
                     }[after["kind"]])
    delay = f"{when['delay_s']:.3f} s"
    return ", ".join(said) + (f", then {delay}" if when["delay_s"] else "") if said else delay


def _requests_table(requests: list[ReproRequest], kept: int) -> list[str]:
    lines = ["| session | path | sent | max_tokens | parameters | what it is |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r, when in zip(requests, _schedule(requests)):
        what = "the failing request" if r.session == kept else r.item.role or r.item.shape
        lines.append(f"| {r.session} | {r.item.api or 'run default'} | {_when(requests, when)} | "
                     f"{r.item.max_tokens} | {r.item.params.describe()} | {what} |")
    return lines


def report_md(case: ReproCase, requests: list[ReproRequest], outcome: Outcome,
              bisect: BisectReport | None) -> str:
    t, k = case.target, case.kept
    engine = t.engine_version or t.engine
    where = f"`{engine}`" if engine else f"the server at {t.base_url}"
    how = ("sent one at a time" if case.concurrency == 1
           else f"at up to {case.concurrency} requests in flight")
    lines = [
        f"# {k.kind.value.replace('_', ' ')} on {where}, {how}: {len(requests)} request(s)",
        "",
        f"- **Engine**: {engine or 'a server at a URL, version not stated'}",
        f"- **Model**: {t.model or 'not stated'}",
        f"- **Environment**: {t.environment}",
    ]
    if t.patches:
        lines.append(f"- **Patches applied**: {', '.join(t.patches)}")
    if outcome.command is not None:
        lines += ["", "Launched as (its port aside, as `batchprobe repro` launched it):", "",
                  "```sh", shlex.join(outcome.command), "```"]
    lines += [
        "",
        "## How to run it",
        "",
        "```sh",
        "python3 -I repro.py --base-url http://127.0.0.1:PORT  # prints BUG and exits 1, or OK",
        "```",
        "",
        "## Expected against actual",
        "",
        f"Seen in the run (arm `{k.arm}`): {k.message}",
        "",
    ]
    for d in t.diagnoses:
        patch = f", patch `{d.patch}`" if d.patch else ""
        said = f"The server log, as batchprobe read it in the run: **{d.title}** (`{d.issue_id}`{patch}):"
        lines += [said, "", "```", *d.evidence[:6], "```", ""]
    failing = next((r for r in requests if r.session == k.session), None)
    if failing is not None:
        lines += [f"Expected: {_expected(case, failing)}.", ""]
    if outcome.evidence is not None:
        e = outcome.evidence
        said = e.error.message if e.error is not None else repr(e.text[:200])
        lines += [f"Actual, in a replay of the minimal case: session {e.session} answered "
                  f"`{said}` (finish_reason {e.finish_reason!r})"
                  + (f"; it holds the content of session(s) {e.cross_talk_from}"
                     if e.cross_talk_from else "") + ".", ""]
    rate = f"{outcome.confirmed}/{outcome.tries}"
    lines += ["## How often", ""]
    if outcome.flaky:
        lines.append(f"**Flaky**: the whole wave replayed {outcome.tries} times showed it "
                     f"{rate} times; not shrunk (the reproducer sends the whole wave).")
    else:
        lines.append(f"The whole wave replayed {outcome.tries} times: {rate}; the minimal case: "
                     f"{outcome.final_failed}/{outcome.tries}.")
    if outcome.history:
        lines += ["", "Shrink history (each kept step):", ""]
        lines += [f"{i + 1}. {s.what}: {s.requests} request(s), failed {s.failed}/{s.tries}"
                  for i, s in enumerate(outcome.history)]
    lines += ["", "## The requests", "", *_requests_table(requests, k.session)]
    sent = next((r for r in script_case(case, requests, None)["requests"]
                 if r["session"] == k.session), None)
    if sent is not None:
        built = ("" if sent["continues"] is None else
                 f"; a conversation turn, so `repro.py` builds its prompt from session "
                 f"{requests[sent['continues']].session}'s as that one is answered")
        said = f"The failing request's body as the run sent it (`repro.py` holds every one{built}):"
        lines += ["", said, "", "```json", json.dumps(sent["body"], indent=2)[:3000], "```"]
    if bisect is not None:
        lines += ["", "## Versions", "", *_bisect_lines(bisect)]
    return "\n".join(lines) + "\n"


def _bisect_lines(b: BisectReport) -> list[str]:
    """The bisect's answer: the first broken (a regression) or first fixed (a fix) version."""
    first = "first broken" if b.direction == "regression" else "first fixed"
    last = "last good" if b.direction == "regression" else "last broken"
    lines = [f"- `batchprobe bisect` searched `{b.engine}` from {b.good} to {b.bad}"]
    if b.first_changed is not None:
        lines.append(f"- {first} version: **{b.first_changed}**"
                     + (f"; {last}: {b.last_unchanged}" if b.last_unchanged else ""))
    else:
        lines.append(f"- {b.status.value}: {b.message}")
    return lines


def write_all(folder: Path, case: ReproCase, requests: list[ReproRequest], outcome: Outcome,
              base_url: str | None, bisect: BisectReport | None) -> list[Path]:
    """repro.json, repro.py and REPORT.md into ``folder``, each written atomically."""
    minimal = case.model_copy(update={"requests": requests})
    files = {
        "repro.json": minimal.model_dump_json(indent=2),
        "repro.py": script(script_case(case, requests, base_url)),
        "REPORT.md": report_md(case, requests, outcome, bisect),
    }
    written = []
    for name, text in files.items():
        path = folder / name
        write_atomic(path, text)
        written.append(path)
    return written
