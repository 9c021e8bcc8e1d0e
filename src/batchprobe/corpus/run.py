"""Run one version of a corpus case and check its verdict against the case's expectation."""

from __future__ import annotations

import shutil
from importlib.resources import files
from pathlib import Path

from pydantic import JsonValue

from batchprobe.corpus.models import Case, CaseResult, Expectation
from batchprobe.engines import install
from batchprobe.errors import ConfigError
from batchprobe.judge.judged import judged_items
from batchprobe.models.tiny import TINY_FAMILIES, build_tiny
from batchprobe.paths import cache_dir as default_cache_dir
from batchprobe.probe import ProbeListener, plan_run, run_plan
from batchprobe.results.models import Report

TINY = tuple(f"tiny:{family}" for family in TINY_FAMILIES)


def case_model(model: str, cache_dir: Path | None = None) -> str:
    """The path or alias to launch: tiny models are built once into the cache."""
    if model not in TINY:
        return model
    family = model.removeprefix("tiny:")
    # vllm-mlx picks its multimodal engine by path: the folder keeps the family's name.
    target = default_cache_dir(cache_dir) / "models" / f"tiny-{family}"
    if (target / "config.json").is_file():
        return str(target)
    staging = target.with_name(f".{target.name}.building")
    shutil.rmtree(staging, ignore_errors=True)
    build_tiny(family, staging, cache_dir=cache_dir)
    staging.rename(target)
    return str(target)


def run_options(case: Case) -> dict[str, JsonValue]:
    """The case's ``plan_run`` options; ``replay`` (a repro.json) names a file shipped
    beside the built-in cases, or a path."""
    given = case.run.get("replay")
    if not isinstance(given, str) or Path(given).is_absolute():
        return dict(case.run)
    shipped = Path(str(files("batchprobe.corpus"))) / "cases" / given
    return {**case.run, "replay": str(shipped) if shipped.is_file() else given}


def check(report: Report, expect: Expectation) -> list[str]:
    """How ``report`` differs from ``expect``; [] when it is as expected."""
    found: list[str] = []
    if report.status is not expect.status:
        detail = report.error.message if report.error else ""
        found.append(f"the run ended {report.status.value}, expected {expect.status.value} "
                     f"{detail}".strip())
    verdict = report.verdict
    for name in ("outcome", "correct", "parallel"):
        wanted, got = getattr(expect, name), getattr(verdict, name)
        if wanted is not None and got != wanted:
            shown = got.value if hasattr(got, "value") else got
            found.append(f"{name} is {shown}, expected {getattr(wanted, 'value', wanted)}")
    ids = {d.issue_id for d in report.diagnoses}
    found += [f"{i} was not diagnosed (got: {sorted(ids)})" for i in expect.diagnosed if i not in ids]
    found += [f"{i} was diagnosed, expected not" for i in expect.not_diagnosed if i in ids]
    kinds = {k for arm in report.arms if arm.metrics for k in arm.metrics.errors_by_kind}
    found += [
        f"no {k.value} error (got: {sorted(x.value for x in kinds)})"
        for k in expect.error_kinds
        if k not in kinds
    ]
    if expect.no_errors and kinds:
        found.append(f"requests failed: {sorted(k.value for k in kinds)}")
    if expect.clean:
        if judged_items(report) == 0:
            found.append("no answer was judged, expected a clean run that judged some")
        if verdict.correct is False and expect.correct is None:
            found.append("correct is False, expected not false (clean)")
    return found


def run_case(
    case: Case,
    version: str,
    output_dir: Path,
    *,
    default_plan: bool = False,
    cache_dir: Path | None = None,
    listener: ProbeListener | None = None,
) -> CaseResult:
    """Install the case's engine at ``version`` (a label such as broken, or the version),
    probe it as the case says (``default_plan``: with no run options, as ``batchprobe run``
    does by default), and compare the verdict with that plan's expectation. A version
    expected wrong is run again, up to ``case.tries`` runs, while its run was not wrong (a
    bug that needs requests to meet by timing); its last verdict is compared."""
    entry = case.version(version)
    if not output_dir.is_dir():
        raise ConfigError("output_dir", f"{output_dir} is not a folder")
    suffix, expect, options = (
        ("-default", entry.expect_default, {}) if default_plan
        else ("", entry.expect, run_options(case))
    )
    if expect is None:
        raise ConfigError(
            "default_plan", f"{case.case_id} {entry.label} is not checked under the default "
            f"plan: {entry.default_plan_not_checked}",
        )  # fmt: skip
    ref = f"{case.engine}=={entry.version}"
    install(ref, cache_dir=cache_dir)
    # Only a version whose run must be wrong is tried again, and only while it was not.
    tries = case.tries if expect.correct is False else 1
    model = case_model(case.model, cache_dir)
    for attempt in range(1, tries + 1):
        again = f"-try{attempt}" if attempt > 1 else ""
        verdict_file = output_dir / f"{case.case_id}-{entry.label}{suffix}{again}.json"
        plan = plan_run(
            engine=ref,
            model=model,
            patches=entry.patches,
            engine_args=entry.engine_args,
            output=verdict_file,
            cache_dir=cache_dir,
            **options,  # type: ignore[arg-type]
        )
        report = run_plan(plan, listener)
        if report.verdict.correct is False:
            break
    return CaseResult(
        case_id=case.case_id,
        version=entry.version,
        label=entry.label,
        verdict_file=str(verdict_file),
        mismatches=check(report, expect),
        tries=attempt,
    )
