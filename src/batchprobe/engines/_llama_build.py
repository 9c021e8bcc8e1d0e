"""Build `llama-server` from the llama.cpp tree vendored in the llama-cpp-python sdist."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tarfile
from pathlib import Path

from batchprobe.engines._steps import OnStep, run_step
from batchprobe.engines._types import PlatformName
from batchprobe.engines.llama_cpp import cmake_flags
from batchprobe.errors import EngineInstallFailed

TOOLS = ("cmake", "ninja")


_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


class NinjaProgress:
    """Reads ninja's ``[12/345] Building CXX ...`` lines; says the percentage every 10%."""

    def __init__(self, on_step: OnStep, every: int = 10) -> None:
        self.on_step = on_step
        self.every = every
        self.said = 0

    def __call__(self, line: str) -> None:
        found = _NINJA_STEP.match(line)
        if found is None or int(found.group(2)) == 0:
            return
        percent = 100 * int(found.group(1)) // int(found.group(2))
        if percent >= self.said + self.every:
            self.said = percent - percent % self.every
            self.on_step(f"compiling llama-server: {percent}% ({found.group(1)}/{found.group(2)})")


def missing_tools() -> list[str]:
    """Build tools not on PATH (a C++ compiler counts as one)."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if not any(shutil.which(cxx) for cxx in ("c++", "g++", "clang++")):
        missing.append("c++ compiler")
    return missing


def build_llama_server(
    package: str, version: str, root: Path, platform: PlatformName, log: Path, on_step: OnStep
) -> None:
    """Download, unpack, configure and build; leaves ``root/bin/llama-server``."""
    missing = missing_tools()
    if missing:
        raise EngineInstallFailed(
            f"building llama-server needs {', '.join(missing)} "
            "(Debian: apt-get install cmake ninja-build g++; macOS: brew install cmake ninja)"
        )
    work = root.parent / f".work-{version}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        source = _fetch_source(package, version, work, log, on_step)
        on_step("configuring llama.cpp (cmake)")
        build = work / "build"
        run_step(
            ["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja", *cmake_flags(platform)],
            log,
        )
        on_step("compiling llama-server (several minutes)")
        jobs = str(os.cpu_count() or 1)
        run_step(["ninja", "-C", str(build), "-j", jobs, "llama-server"], log,
                 on_line=NinjaProgress(on_step))
        (root / "bin").mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "bin" / "llama-server", root / "bin" / "llama-server")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fetch_source(package: str, version: str, work: Path, log: Path, on_step: OnStep) -> Path:
    on_step(f"downloading the {package}=={version} sdist")
    run_step(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            f"{package}=={version}",
            "-d",
            str(work / "dl"),
        ],
        log,
    )
    archives = sorted((work / "dl").glob("*.tar.gz"))
    if not archives:
        raise EngineInstallFailed(f"pip download of {package}=={version} gave no .tar.gz sdist")
    on_step("unpacking the sdist")
    with tarfile.open(archives[0]) as tar:
        tar.extractall(work / "src", filter="data")
    found = sorted((work / "src").glob("*/vendor/llama.cpp/CMakeLists.txt"))
    if not found:
        raise EngineInstallFailed(f"{archives[0].name} has no vendor/llama.cpp")
    return found[0].parent
