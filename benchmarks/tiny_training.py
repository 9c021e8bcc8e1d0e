"""What the tiny task models do: per family, the build time and, on every engine that loads the
family, the serial recall and decode-check accuracy on the probe's own items.

The models are constructed, not trained (``batchprobe.models.tiny_task``), so "training time"
is the build: a fresh one into a temporary folder, timed. Each engine then serves the model
(the ``tiny-llama``, ``tiny-gemma3`` or ``tiny-gemma4`` alias, the GGUF or the checkpoint as the
engine loads) to a serial plan of
the burst wave: ``--sessions`` recall prompts and as many counts, one at a time, cold, in the
completion style and then in the chat style. An answer counts when its own check passed (its
needle; its count run on to its max_tokens).

    python benchmarks/tiny_training.py [--engines llama.cpp,transformers,mlx-lm,vllm-mlx]
                                       [--sessions 20] [--folder DIR]

Targets (issue 31, 2 cores): build <= 5 min per family; recall >= 95% and decode check >= 95%
on every engine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from batchprobe.models.tiny_task import TASK_FAMILIES, build_task
from batchprobe.probe import plan_run, run_plan
from batchprobe.results import Report

ENGINES = ("llama.cpp", "transformers", "mlx-lm", "vllm-mlx")
ALIAS = {"llama": "tiny-llama", "gemma3": "tiny-gemma3", "gemma4": "tiny-gemma4",
         "gemma4-wide": "tiny-gemma4-wide"}
# The engines that load a family: only llama has a GGUF (llama.cpp's share is tiny-llama's).
# transformers serve loads a Gemma-4 checkpoint's image and video processors, which need Pillow
# and torchvision: PyPI's torchvision does not load beside the CPU torch of its environment.
LOADS = {"gemma3": ("transformers", "mlx-lm", "vllm-mlx"), "gemma4": ("mlx-lm", "vllm-mlx"),
         "gemma4-wide": ("mlx-lm", "vllm-mlx")}


@dataclass
class Accuracy:
    engine: str
    recall: tuple[int, int]
    decode: tuple[int, int]
    wall_s: float
    status: str

    def line(self) -> str:
        (r, rn), (d, dn) = self.recall, self.decode
        return (f"  {self.engine:<24} recall {r}/{rn} ({_pct(r, rn)})  decode check {d}/{dn} "
                f"({_pct(d, dn)})  {self.wall_s:.0f} s  [{self.status}]")


def _pct(k: int, n: int) -> str:
    return f"{k / n:.0%}" if n else "-"


def serial_accuracy(engine: str, model: str, sessions: int, folder: Path, style: str) -> Accuracy:
    """The serial arm of a burst-only plan on ``engine``: how many answers passed their check."""
    t0 = time.monotonic()
    plan = plan_run(engine=engine, model=model, arms="simple@1", shapes="burst",
                    sessions=sessions, prompt_style=style,  # type: ignore[arg-type]
                    output=folder / f"{model}-{engine}-{style}.json")
    report: Report = run_plan(plan)
    tally = {"recall": [0, 0], "decode": [0, 0]}
    for s in report.arms[0].sessions if report.arms else []:
        tally[s.workload][1] += 1
        tally[s.workload][0] += s.error is None and s.check is not None and s.check.passed
    return Accuracy(f"{engine} {style}", (tally["recall"][0], tally["recall"][1]),
                    (tally["decode"][0], tally["decode"][1]), time.monotonic() - t0,
                    report.status.value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--folder", type=Path, default=None)
    args = ap.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="tiny-training-"))
    for family in TASK_FAMILIES:
        t0 = time.monotonic()
        build_task(family, folder / f"build-{family}")
        print(f"{family}: built in {time.monotonic() - t0:.1f} s (constructed, no training)")
        for engine in (e for e in args.engines.split(",") if e in LOADS.get(family, ENGINES)):
            for style in ("completion", "chat"):
                got = serial_accuracy(engine, ALIAS[family], args.sessions, folder, style)
                print(got.line(), flush=True)


if __name__ == "__main__":
    main()
