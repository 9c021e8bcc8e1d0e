"""Engines: install each server version into its own environment, launch it, explain failures.

One module per engine (``llama_cpp``, ``mlx_lm``, ``vllm_mlx``, ``transformers_serve``,
``vllm``, ``sglang``, ``ollama``, ``serve_cmd``); third parties add engines through the
``batchprobe.engines`` entry-point group or an :class:`EngineRegistry` of their own.
"""

from __future__ import annotations

from batchprobe.engines._base import Engine, PipEngine
from batchprobe.engines._diagnosis import diagnose, diagnose_findings, last_traceback
from batchprobe.engines._doctor import DoctorCheck, doctor
from batchprobe.engines._envs import (
    MARKER,
    find_installation,
    install,
    install_command,
    installed_versions,
    require_installation,
    resolve,
)
from batchprobe.engines._known import KNOWN_ISSUES_GROUP, KnownIssue, plugin_known_issues
from batchprobe.engines._launches import LaunchRecord, StaleLaunch, reap_stale, stale_launches
from batchprobe.engines._lifecycle import DEFAULT_READY_TIMEOUT_S, RunningEngine, launch
from batchprobe.engines._process import reserve_port
from batchprobe.engines._ref import EngineRef
from batchprobe.engines._registry import (
    ENTRY_POINT_GROUP,
    EngineRegistry,
    builtin_engines,
    default_registry,
    get_engine,
)
from batchprobe.engines._types import (
    MODES,
    Capabilities,
    Installation,
    InstallRecipe,
    LaunchSpec,
    Mode,
    current_platform,
)
from batchprobe.engines.serve_cmd import ServeCmd
from batchprobe.processes import group_members, launch_processes

__all__ = [
    "DEFAULT_READY_TIMEOUT_S",
    "ENTRY_POINT_GROUP",
    "KNOWN_ISSUES_GROUP",
    "MARKER",
    "MODES",
    "Capabilities",
    "DoctorCheck",
    "Engine",
    "EngineRef",
    "EngineRegistry",
    "InstallRecipe",
    "Installation",
    "KnownIssue",
    "LaunchRecord",
    "LaunchSpec",
    "Mode",
    "PipEngine",
    "RunningEngine",
    "ServeCmd",
    "StaleLaunch",
    "builtin_engines",
    "current_platform",
    "default_registry",
    "diagnose",
    "diagnose_findings",
    "doctor",
    "find_installation",
    "get_engine",
    "group_members",
    "install",
    "install_command",
    "installed_versions",
    "last_traceback",
    "launch",
    "launch_processes",
    "plugin_known_issues",
    "reap_stale",
    "require_installation",
    "reserve_port",
    "resolve",
    "stale_launches",
]
