"""The judge: the one stage where a judgement is made.

It reads the answers and their situations, asks the probe for the cold serial references and
the replays it needs (``references_needed``, ``replay_candidates``), and returns the typed
findings (``judge``); the verdict (``decide``), each step's ``correct``, the judged counts and
the named checks that JUnit and the gate read are computed from those findings here, once.
Every output (console, progress, HTML, markdown, JUnit, CSV, JSONL, compare) is a view of them;
``request_view`` says how a request stands (failed, soft, not judged, ok) for all of them.
A function of the verdict file alone: ``final_pass`` (the run's last step) and ``rejudge``
(``batchprobe judge``) score every answer again from its saved request and judge it all.
"""

from batchprobe.judge.checks import Check, CheckStatus, arm_correct, run_checks
from batchprobe.judge.final import final_pass, rejudge
from batchprobe.judge.judge import Judgement, judge
from batchprobe.judge.judged import judged_answers, judged_items, recall
from batchprobe.judge.verdict import decide
from batchprobe.judge.views import RequestStatus, RequestView, RequestViews, request_view

__all__ = [
    "Check",
    "CheckStatus",
    "Judgement",
    "RequestStatus",
    "RequestView",
    "RequestViews",
    "arm_correct",
    "decide",
    "final_pass",
    "judge",
    "judged_answers",
    "judged_items",
    "recall",
    "rejudge",
    "request_view",
    "run_checks",
]
