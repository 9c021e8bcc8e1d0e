"""The corpus as data: every built-in case is valid, names a real known issue of its engine,
and its run options pass plan_run; other packages add cases and known issues by entry point."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from batchprobe.cli import main
from batchprobe.corpus import Case, Corpus, default_corpus, run_case, run_options
from batchprobe.engines import diagnose, get_engine, plugin_known_issues
from batchprobe.errors import ConfigError
from batchprobe.probe import plan_run

CASES = default_corpus()


def test_the_corpus_holds_the_seed_and_the_llama_cpp_python_cases() -> None:
    assert {"vllm-mlx-gemma4-shared-kv", "llama-cpp-python-interrupt-requests"} <= set(CASES.ids())


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: c.case_id)
def test_a_case_names_its_engine_s_known_issue_and_valid_run_options(
    case: Case, tmp_path: Path
) -> None:
    engine = get_engine(case.engine)
    issues = {issue.issue_id for issue in engine.known_issues}
    assert case.issue_id in issues
    labels = [v.label for v in case.versions]
    assert len(set(labels)) == len(labels)
    # A broken version must be caught by name, and something must be clean of it.
    assert any(case.issue_id in v.expect.diagnosed for v in case.versions)
    assert any(case.issue_id in v.expect.not_diagnosed for v in case.versions)
    for entry in case.versions:
        plan = plan_run(
            engine=f"{case.engine}=={entry.version}",
            model=str(tmp_path),
            patches=entry.patches,
            engine_args=entry.engine_args,
            output=tmp_path / "v.json",
            **run_options(case),  # type: ignore[arg-type]
        )
        assert plan.config.engine_args == entry.engine_args


def test_a_fixed_version_must_expect_a_clean_run_under_both_plans() -> None:
    case = CASES.get("vllm-mlx-gemma4-shared-kv")
    data = case.model_dump(mode="json")
    fixed = next(v for v in data["versions"] if v["label"] == "fixed")
    # The case's fixed version as it would stand checked under the default plan too.
    fixed["default_plan_not_checked"] = None
    fixed["expect_default"] = {"no_errors": True, "clean": True,
                               "not_diagnosed": ["vllm-mlx-gemma4-shared-kv"]}
    Case.model_validate(data)
    assert fixed["expect"]["clean"] and fixed["expect_default"]["clean"]
    for plan, change, error in (
        ("expect", {"clean": False}, "fixed: expect must say clean: true"),
        ("expect_default", {"clean": False}, "fixed: expect_default must say clean: true"),
        ("expect_default", {"correct": False}, "contradicts correct: false"),
    ):
        broken = json.loads(json.dumps(data))
        entry = next(v for v in broken["versions"] if v["label"] == "fixed")
        entry[plan].update(change)
        with pytest.raises(ValidationError, match=error):
            Case.model_validate(broken)
    at = next(i for i, v in enumerate(data["versions"]) if v["label"] == "fixed")
    missing = json.loads(json.dumps(data))
    del missing["versions"][at]["expect_default"]
    with pytest.raises(ValidationError, match="give expect_default or default_plan_not_checked"):
        Case.model_validate(missing)
    both = json.loads(json.dumps(data))
    both["versions"][at]["default_plan_not_checked"] = "too slow"
    with pytest.raises(ValidationError, match="give expect_default or default_plan_not_checked"):
        Case.model_validate(both)


def test_a_version_not_checked_under_the_default_plan_says_why_and_runs_nothing(
    tmp_path: Path,
) -> None:
    case, entry = next(
        (c, v) for c in CASES for v in c.versions if v.default_plan_not_checked is not None
    )
    result = CliRunner().invoke(
        main, ["corpus", "run", case.case_id, "--version", entry.label, "--default-plan",
               "--output-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "not checked" in result.output and entry.default_plan_not_checked in " ".join(
        result.output.split()
    )
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError) as caught:
        run_case(case, entry.label, tmp_path, default_plan=True)
    assert caught.value.field == "default_plan" and "not checked" in str(caught.value)


def test_duplicate_and_unknown_cases_are_config_errors() -> None:
    case = next(iter(CASES))
    with pytest.raises(ConfigError, match="already in the corpus"):
        Corpus([case, case])
    with pytest.raises(ConfigError) as caught:
        CASES.get("nope")
    assert caught.value.field == "case" and case.case_id in str(caught.value)
    with pytest.raises(ConfigError, match="known: broken"):
        case.version("nope")


PLUGIN = '''
from batchprobe.corpus import Case
from batchprobe.engines import KnownIssue

ISSUE = KnownIssue(issue_id="plugin-busy", title="t", patterns=(r"plugin-busy-signature",),
                   explanation="e", remedy="r")


def cases():
    return [Case(case_id="plugin-case", title="t", issue_id="plugin-busy", references=[],
                 engine="llama.cpp", model="gemma3-270m",
                 versions=[{"version": "0.3.36", "label": "broken", "expect": {},
                            "expect_default": {}}])]
'''


def test_another_package_adds_cases_and_known_issues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bp_plugin.py").write_text(PLUGIN)
    info = tmp_path / "bp_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bp-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[batchprobe.corpus]\nplugin = bp_plugin:cases\n\n"
        "[batchprobe.known_issues]\nllama.cpp = bp_plugin:ISSUE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bp_plugin", raising=False)
    assert "plugin-case" in default_corpus().ids()
    assert [i.issue_id for i in plugin_known_issues("llama.cpp")] == ["plugin-busy"]
    assert plugin_known_issues("mlx-lm") == []
    found = diagnose("llama.cpp", "0.3.36", "x plugin-busy-signature y\n")
    assert [d.issue_id for d in found] == ["plugin-busy"]


def test_corpus_cli_lists_cases_and_names_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(main, ["corpus", "list"])
    assert listed.exit_code == 0 and "vllm-mlx-gemma4-shared-kv" in listed.output
    unknown = runner.invoke(main, ["corpus", "run", "nope", "--output-dir", str(tmp_path)])
    assert unknown.exit_code == 2 and "known:" in unknown.output
    bad = runner.invoke(
        main, ["corpus", "run", "vllm-mlx-gemma4-shared-kv", "--version", "9.9", "--output-dir",
               str(tmp_path)],
    )  # fmt: skip
    assert bad.exit_code == 2 and "broken (0.3.0)" in bad.output
    assert "Traceback" not in unknown.output + bad.output
