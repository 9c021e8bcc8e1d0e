"""Reports and the gate on real verdicts: the vllm-mlx 0.3.0 seed FAIL and 0.6.0 on tiny gemma-4."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from junitparser import Failure, JUnitXml
from markdown_it import MarkdownIt

from batchprobe.cli import main
from batchprobe.engines import Installation
from batchprobe.report import render_html, render_junit, render_markdown
from batchprobe.report.html import session_grid
from e2e._run import batchprobe_run

from .conftest import artifacts_dir, load
from .test_html_chromium import _inspect

pytestmark = pytest.mark.engine

TINY = ["--quick", "--sessions", "4", "--haystack-tokens", "128", "--max-tokens", "16"]


def _real_verdict(version: str, model: Path, folder: Path) -> Path:
    output = folder / f"vllm-mlx-{version}.json"
    batchprobe_run(["--engine", f"vllm-mlx=={version}", "--model", str(model), *TINY,
                    "--report", "html,md,junit"], output)
    for produced in folder.glob(f"vllm-mlx-{version}.*"):
        shutil.copyfile(produced, artifacts_dir() / produced.name)
    return output


@pytest.fixture(scope="module")
def seed_fail(vllm_mlx_030: Installation, tiny_gemma4_dir: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _real_verdict("0.3.0", tiny_gemma4_dir, tmp_path_factory.mktemp("real"))


@pytest.fixture(scope="module")
def fixed(vllm_mlx_060: Installation, tiny_gemma4_dir: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _real_verdict("0.6.0", tiny_gemma4_dir, tmp_path_factory.mktemp("real"))


def test_seed_fail_in_every_format(seed_fail: Path, tmp_path: Path) -> None:
    report = load(seed_fail)
    assert report.verdict.outcome.value == "FAIL"
    # `run --report` wrote them beside the verdict, the same as rendering the verdict now.
    assert seed_fail.with_suffix(".md").read_text() == render_markdown(report)
    junit = seed_fail.with_name("vllm-mlx-0.3.0.junit.xml")
    assert junit.read_text() == render_junit(report)
    cases = {f"{c.classname}.{c.name}": c for s in JUnitXml.fromfile(str(junit)) for c in s}
    for arm in ("batching@1", "batching@4"):
        failure = [r for r in cases[f"batchprobe.{arm}.burst.errors"].result
                   if isinstance(r, Failure)]
        assert failure and "finish_reason_error" in (failure[0].message or ""), arm
    assert not cases["batchprobe.simple@1.burst.errors"].result
    assert any(isinstance(r, Failure) for r in cases["batchprobe.run.correct"].result)
    md = render_markdown(report)
    MarkdownIt("commonmark").enable("table").parse(md)
    assert "vllm-mlx-gemma4-shared-kv" in md and "shared_kv" in md
    html = render_html(report)
    assert "vllm-mlx-gemma4-shared-kv" in html and "Remedy:" in html
    # Every session of both batching arms (all shapes) errored, and each cell says so.
    batching = [x for a in report.arms if a.spec.mode == "batching" for x in a.sessions]
    assert batching and all(x.error is not None for x in batching)
    assert html.count('<summary class="error">finish_reason_error</summary>') == len(batching)


def test_seed_fail_html_in_headless_chromium(seed_fail: Path) -> None:
    html = seed_fail.with_suffix(".html")
    found = asyncio.run(_inspect(html, "vllm-mlx-0.3.0"))
    assert found["log"].console == []
    assert set(found["log"].requests) == {html.as_uri()}
    cells = len(session_grid(load(seed_fail))) * 3  # every request x the three arms
    for view in ("desktop", "phone"):
        assert len(found[view]["plots"]) >= 2 and found[view]["grid"][2] == cells


def test_compare_fixed_then_seed_is_a_regression(seed_fail: Path, fixed: Path) -> None:
    # The gate can only see the seed's errors as a regression where the fixed run had none.
    errors = {a.spec.name: a.metrics.errors_by_kind for a in load(fixed).arms if a.metrics}
    assert not any(errors.values()), errors
    result = CliRunner().invoke(main, ["compare", str(fixed), str(seed_fail), "--gate"])
    assert result.exit_code == 1, result.output
    flat = " ".join(result.output.split())
    assert "batching@4.burst.errors failed" in flat and "finish_reason_error" in flat
    assert "vllm-mlx==0.6.0" in flat and "vllm-mlx==0.3.0" in flat
    # The other way round the errors are fixed.
    back = CliRunner().invoke(main, ["compare", str(seed_fail), str(fixed)])
    assert back.exit_code == 0 and "batching@4.burst.errors passes" in " ".join(back.output.split())
