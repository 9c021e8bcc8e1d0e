"""The llama-server build says how far ninja is, as ninja prints it (not one line for minutes)."""

from __future__ import annotations

import sys
from pathlib import Path

from batchprobe.engines._llama_build import NinjaProgress
from batchprobe.engines._steps import run_step

NINJA_LIKE = "import sys\nfor i in range(1, 41):\n    print(f'[{i}/40] Building CXX object o{i}.o', flush=True)\n"


def test_each_tenth_of_the_build_is_said_as_its_lines_come(tmp_path: Path) -> None:
    log = tmp_path / "install.log"
    said: list[str] = []
    run_step([sys.executable, "-c", NINJA_LIKE], log, on_line=NinjaProgress(said.append))
    assert said == [f"compiling llama-server: {p}% ({p * 40 // 100}/40)"
                    for p in range(10, 101, 10)]
    text = log.read_text()
    assert "[1/40] Building CXX object o1.o" in text and "[40/40]" in text, "the log keeps all"


def test_lines_that_are_not_ninja_steps_say_nothing(tmp_path: Path) -> None:
    said: list[str] = []
    progress = NinjaProgress(said.append)
    for line in ("-- Configuring done", "[0/0] nothing", "ninja: no work to do."):
        progress(line)
    assert said == []
