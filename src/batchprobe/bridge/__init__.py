"""The bridge: allowlisted, bounded probe runs on remote hardware over a git bus.

A client pushes a request branch carrying a manifest; a GitHub Actions self-hosted runner
executes the manifest's preset (argv lists only, typed bounded parameters, machine-local
facts from ``${ENV:NAME}``) and commits the summary, logs and verdicts back.
"""

from batchprobe.bridge.executor import ExecutorSettings, execute
from batchprobe.bridge.gitbus import (
    BranchState,
    Receipt,
    branch_name,
    check,
    fetch_results,
    publish_results,
    request,
    wait_for_results,
)
from batchprobe.bridge.manifest import (
    Manifest,
    build_commands,
    load_manifest,
    new_manifest,
    parse_manifest,
    validate_manifest,
)
from batchprobe.bridge.presets import PRESETS, ExecContext, Preset, get_preset
from batchprobe.bridge.summary import CommandResult, Summary
from batchprobe.bridge.workflow import render_workflow, write_workflow

__all__ = [
    "PRESETS",
    "BranchState",
    "CommandResult",
    "ExecContext",
    "ExecutorSettings",
    "Manifest",
    "Preset",
    "Receipt",
    "Summary",
    "branch_name",
    "build_commands",
    "check",
    "execute",
    "fetch_results",
    "get_preset",
    "load_manifest",
    "new_manifest",
    "parse_manifest",
    "publish_results",
    "render_workflow",
    "request",
    "validate_manifest",
    "wait_for_results",
    "write_workflow",
]
