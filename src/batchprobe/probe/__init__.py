"""Plans, arms, orchestration, metrics and the verdict; ``plan_run``/``run_plan`` are the entry
point (the CLI calls nothing else)."""

from batchprobe.probe.api import RunPlan, plan_run, run_plan
from batchprobe.probe.state import PlanSummary, ProbeListener

__all__ = ["PlanSummary", "ProbeListener", "RunPlan", "plan_run", "run_plan"]
