"""Plans, arms, orchestration, metrics and the verdict; ``plan_run``/``run_plan`` are the entry
point (the CLI calls nothing else)."""

from batchprobe.probe.api import RunPlan, plan_run, run_plan
from batchprobe.probe.run import ProbeListener

__all__ = ["ProbeListener", "RunPlan", "plan_run", "run_plan"]
