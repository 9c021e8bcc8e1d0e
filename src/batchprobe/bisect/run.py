"""`bisect`: find the first version of an engine that broke (or fixed) what a probe judges.

    plan = plan_bisect(engine="vllm-mlx", good="0.6.0", bad="0.3.0", model=tiny, workloads="decode")
    report = run_bisect(plan)

Every version is installed on demand in its own cached environment and probed with the same
run options; each verdict is kept beside the bisect file, which is rewritten after every
version, so a bisect stopped half-way resumes from it without re-probing anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import JsonValue, ValidationError

from batchprobe.bisect.search import Conclusion, most_probes, next_step
from batchprobe.bisect.versions import between, index_versions, parse_version
from batchprobe.engines import current_platform, get_engine, install
from batchprobe.errors import ConfigError, EngineInstallFailed
from batchprobe.files import write_atomic
from batchprobe.judge.judged import judged_items
from batchprobe.probe import ProbeListener, plan_run, run_plan
from batchprobe.results.bisect import (
    BisectReport,
    BisectStatus,
    Criterion,
    Judgement,
    VersionTry,
)
from batchprobe.results.models import Outcome, Report, Status

# Run options a bisect sets itself, per version.
_OWN_OPTIONS = ("base_url", "engine", "serve_cmd", "output", "cache_dir", "on_install_step")

OnEvent = Callable[[str], None]


def _quiet(_: str) -> None:
    """Default event callback: say nothing."""


@dataclass(frozen=True)
class BisectPlan:
    """A validated bisect: the versions in play and how each one is probed."""

    report: BisectReport
    output: Path
    verdict_dir: Path
    cache_dir: Path | None


def _engine_name(engine: str) -> str:
    name = engine.strip()
    if "==" in name:
        raise ConfigError("engine", "give the name only (the versions are --good and --bad)")
    found = get_engine(name)
    recipe = found.install_recipe(found.default_version or "0", current_platform())
    if recipe.kind in ("none", "external"):
        raise ConfigError(
            "engine", f"{found.name} is not installed by batchprobe, so it has no versions to try"
        )
    return found.name


def _resume(output: Path, fresh: BisectReport) -> BisectReport:
    """The bisect already in ``output`` when it is this one; a fresh one when there is none."""
    if not output.exists():
        return fresh
    try:
        old = BisectReport.model_validate_json(output.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        raise ConfigError(
            "output", f"{output} exists and is not a bisect file ({exc}); give another --output"
        ) from exc
    same = ("engine", "good", "bad", "criterion", "check_ends", "probe_options")
    differ = [f for f in same if getattr(old, f) != getattr(fresh, f)]
    if differ:
        raise ConfigError(
            "output",
            f"{output} holds a bisect with another {', '.join(differ)}; give another --output "
            "or delete it to start over",
        )
    # Keep the stored version list: the index may have grown, and the path must replay.
    return old.model_copy(update={"status": BisectStatus.RUNNING, "message": ""})


def plan_bisect(
    *,
    engine: str,
    good: str,
    bad: str,
    criterion: Criterion | str = Criterion.CORRECT,
    check_ends: bool = False,
    versions: list[str] | str | None = None,
    output: Path | str = Path("bisect.json"),
    cache_dir: Path | None = None,
    **run_options: JsonValue,
) -> BisectPlan:
    """Validate a bisect; ``run_options`` are ``plan_run``'s (model, workloads, sweep, ...).

    ``versions`` replaces the package index's list of releases (the ends are added to it).
    """
    name = _engine_name(engine)
    for own in _OWN_OPTIONS:
        if own in run_options:
            raise ConfigError(own, "is set by bisect itself for every version; drop it")
    try:
        judged_by = Criterion(criterion)
    except ValueError as exc:
        allowed = ", ".join(c.value for c in Criterion)
        raise ConfigError("criterion", f"{criterion!r} is not one of {allowed}") from exc
    if isinstance(versions, str):
        versions = [v.strip() for v in versions.split(",") if v.strip()]
    order = between(versions or [], good, bad)  # the two ends are checked before the index
    if versions is None:
        package = get_engine(name).package
        if package is None:
            raise ConfigError("engine", f"{name} names no package whose versions could be listed")
        order = between(index_versions(package), good, bad)
    output = Path(output)
    # The run options (and that the bisect file's folder is writable) are checked now, once,
    # rather than after the first install; nothing is written yet.
    plan_run(
        engine=f"{name}=={good}",
        output=output,
        cache_dir=cache_dir,
        **run_options,  # type: ignore[arg-type]
    )
    verdict_dir = output.with_name(output.stem + "-verdicts")
    verdict_dir.mkdir(exist_ok=True)
    older_good = parse_version("good", good) < parse_version("bad", bad)
    direction: Literal["regression", "fix"] = "regression" if older_good else "fix"
    fresh = BisectReport(
        engine=name,
        good=good,
        bad=bad,
        direction=direction,
        criterion=judged_by,
        check_ends=check_ends,
        probe_options=dict(run_options),
        versions=order,
    )
    return BisectPlan(_resume(output, fresh), output, verdict_dir, cache_dir)


def _criterion_value(report: Report, criterion: Criterion) -> bool | None:
    """What the verdict says about ``criterion``: True holds, False failed, None not judged."""
    verdict = report.verdict
    if criterion is Criterion.CORRECT:
        return verdict.correct
    if criterion is Criterion.PARALLEL:
        return verdict.parallel
    if criterion is Criterion.OUTCOME:
        return None if verdict.outcome is Outcome.INCONCLUSIVE else verdict.outcome is Outcome.PASS
    return verdict.correct is not False  # no-failure: nothing judged went wrong


def judge(report: Report, criterion: Criterion) -> tuple[Judgement, str]:
    """A verdict as good, bad or skipped (with why). The one rule of a bisect:

    - bad: the criterion failed on what was judged, however the run ended: an engine that
      answered wrong and then died (status engine_died, ``correct`` false) is bad;
    - good: the run finished, the criterion holds, and at least one answer was judged;
    - skipped: everything else, the versions that never got judged: the run stopped before
      anything failed, the criterion could not be judged, or no answer was judged at all
      (a server that answers every request with HTTP 500 fails nothing and passes nothing).
    """
    value = _criterion_value(report, criterion)
    why = "; ".join(report.verdict.reasons[:2]) or report.verdict.outcome.value
    if value is False:
        ended = "" if report.status is Status.OK else f" (the run ended {report.status.value})"
        return Judgement.BAD, f"{criterion.value}=False{ended}: {why}"
    if report.status is not Status.OK:
        detail = report.error.message if report.error else ""
        return Judgement.SKIPPED, f"the run stopped: {report.status.value} {detail}".strip()
    if value is None:
        return Judgement.SKIPPED, f"{criterion.value} could not be judged: {why}"
    if judged_items(report) == 0:
        return Judgement.SKIPPED, f"no answer was judged: {why}"
    return Judgement.GOOD, f"{criterion.value}=True: {why}"


def version_try(
    version: str, report: Report, criterion: Criterion, verdict_file: Path, seconds: float
) -> VersionTry:
    """A probed version's entry in the bisect file, judged by ``criterion``."""
    judgement, reason = judge(report, criterion)
    return VersionTry(
        version=version,
        judgement=judgement,
        reason=reason,
        verdict_file=str(verdict_file),
        status=report.status.value,
        outcome=report.verdict.outcome,
        correct=report.verdict.correct,
        parallel=report.verdict.parallel,
        judged=judged_items(report),
        diagnoses=[d.issue_id for d in report.diagnoses],
        seconds=round(seconds, 1),
    )


ProbeVersion = Callable[[BisectPlan, str], "VersionTry | None"]


def probe_version(
    plan: BisectPlan,
    version: str,
    listener: ProbeListener | None = None,
    on_event: OnEvent = _quiet,
) -> VersionTry | None:
    """Install ``version`` if needed and probe it; None when the probe was interrupted."""
    bisect = plan.report
    ref = f"{bisect.engine}=={version}"
    started = time.monotonic()
    try:
        install(ref, cache_dir=plan.cache_dir, on_step=lambda text: on_event(f"installing: {text}"))
    except EngineInstallFailed as exc:
        return VersionTry(
            version=version,
            judgement=Judgement.SKIPPED,
            reason=f"could not install: {exc}",
            seconds=round(time.monotonic() - started, 1),
        )
    verdict_file = plan.verdict_dir / f"{bisect.engine}-{version}.json"
    run = plan_run(
        engine=ref,
        output=verdict_file,
        cache_dir=plan.cache_dir,
        **bisect.probe_options,  # type: ignore[arg-type]
    )
    report = run_plan(run, listener)
    if report.status is Status.INTERRUPTED:
        return None
    seconds = time.monotonic() - started
    return version_try(version, report, bisect.criterion, verdict_file, seconds)


def _ends(report: BisectReport) -> tuple[Judgement, Judgement]:
    """The judgements of the oldest and the newest end, as the user stated them."""
    if report.direction == "regression":
        return Judgement.GOOD, Judgement.BAD
    return Judgement.BAD, Judgement.GOOD


def _conclude(report: BisectReport, found: Conclusion) -> BisectReport:
    if found.status is BisectStatus.FOUND:
        what = "first bad" if report.direction == "regression" else "first fixed"
        message = f"{what} version: {report.engine} {found.first_changed}"
    else:
        message = (
            f"the change lies among {', '.join(found.candidates)}: skipped versions hide which"
        )
    probed = sum(1 for t in report.tries if t.version not in (report.good, report.bad))
    message += f" ({probed} versions probed between the ends; a binary search needs at most "
    message += f"{most_probes(report.versions)})"
    return report.model_copy(
        update={
            "status": found.status,
            "first_changed": found.first_changed,
            "last_unchanged": found.last_unchanged,
            "candidates": found.candidates,
            "message": message,
        }
    )


def run_bisect(
    plan: BisectPlan,
    listener: ProbeListener | None = None,
    on_event: OnEvent = _quiet,
    probe: ProbeVersion | None = None,
) -> BisectReport:
    """Bisect; the file at ``plan.output`` is rewritten after every version. A resumed bisect
    replays its recorded versions (a finished one concludes again without probing)."""
    report = plan.report

    def save(update: dict[str, object]) -> BisectReport:
        new = report.model_copy(update=update)
        write_atomic(plan.output, new.model_dump_json(indent=2))
        return new

    def judged(version: str) -> VersionTry | None:
        """The version's try: recorded already, or probed now and recorded; None: interrupted."""
        nonlocal report
        done = report.tried(version)
        if done is not None:
            return done
        on_event(f"probing {report.engine} {version}")
        tried = (
            probe_version(plan, version, listener, on_event)
            if probe is None
            else probe(plan, version)
        )
        if tried is not None:
            report = save({"tries": [*report.tries, tried]})
            on_event(f"{version}: {tried.judgement.value} ({tried.reason})")
        return tried

    report = save({})
    old, new = _ends(report)
    oldest, newest = report.versions[0], report.versions[-1]
    if report.check_ends:
        for version, stated in ((oldest, old), (newest, new)):
            tried = judged(version)
            if tried is None:
                return save({"status": BisectStatus.INTERRUPTED, "message": "interrupted"})
            if tried.judgement is not stated:
                return save(
                    {
                        "status": BisectStatus.ENDS_DISAGREE,
                        "message": f"{version} was given as {stated.value} but was judged "
                        f"{tried.judgement.value}: {tried.reason}",
                    }
                )
    while True:
        known = {t.version: t.judgement for t in report.tries}
        known.update({oldest: old, newest: new})
        step = next_step(report.versions, known, old)
        if isinstance(step, Conclusion):
            report = _conclude(report, step)
            return save({})
        if judged(step) is None:
            return save(
                {"status": BisectStatus.INTERRUPTED, "message": f"interrupted while probing {step}"}
            )
