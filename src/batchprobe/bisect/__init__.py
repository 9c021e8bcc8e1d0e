"""`batchprobe bisect`: the first released version of an engine that broke or fixed what the
probe judges, found by binary search over the package index's releases."""

from batchprobe.bisect.run import BisectPlan, judge, plan_bisect, probe_version, run_bisect
from batchprobe.bisect.search import Conclusion, most_probes, next_step
from batchprobe.bisect.versions import between, index_versions

__all__ = [
    "BisectPlan",
    "Conclusion",
    "between",
    "index_versions",
    "judge",
    "most_probes",
    "next_step",
    "plan_bisect",
    "probe_version",
    "run_bisect",
]
