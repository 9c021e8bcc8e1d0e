"""`batchprobe repro`: a verdict's failure replayed, confirmed, shrunk to the few requests a
maintainer needs, and written as a standalone reproducer (``repro.py``), an issue report
(``REPORT.md``) and the minimal case as data (``repro.json``)."""

from batchprobe.repro.case import ReproCase, case_from
from batchprobe.repro.run import ReproOptions, ReproResult, reproduce

__all__ = ["ReproCase", "ReproOptions", "ReproResult", "case_from", "reproduce"]
