"""JUnit XML: one test case per check, so any CI lists batchprobe's results natively.

The checks are the findings' (``results.checks``): one per arm × shape × check kind, the arm's
own (completed, warm-up, server alive) and the run's (status, outcome, correct, parallel,
envelope). A FAIL always has a failing test case.

A sweep adds one test case per step (``batchprobe.envelope.sweep@N``): it fails with the
step's reasons when the step answered wrongly, and is skipped when it was not judged.

Every text and attribute goes through :func:`~batchprobe._safe.xml_text` (``_Safe``): a model
id or error message holding ESC or NUL would otherwise make XML that CI readers reject.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from batchprobe._safe import xml_text
from batchprobe.judge.checks import CheckStatus, run_checks
from batchprobe.report._cells import headline, subject
from batchprobe.report._error import run_error
from batchprobe.results.models import Report
from batchprobe.results.sweep import SweepStep


def _step_case(suite: ET.Element, step: SweepStep) -> None:
    case = ET.SubElement(suite, "testcase", classname="batchprobe.envelope", name=step.arm,
                         time=f"{step.wall_s:.3f}")
    reasons = "\n".join(step.reasons)
    if step.correct is False:
        first = step.reasons[0] if step.reasons else f"wrong answers at N={step.n}"
        ET.SubElement(case, "failure", message=first, type="sweep_step").text = (
            reasons or first)
    elif step.correct is None:
        ET.SubElement(case, "skipped", message=reasons or f"N={step.n} was not judged")
    else:
        rate = ("" if step.decode_tokens_per_s is None
                else f", {step.decode_tokens_per_s:.1f} tok/s aggregate")
        ET.SubElement(case, "system-out").text = (
            f"N={step.n} ({step.kind}): {step.requests} requests, {step.errors} errors, "
            f"answers correct{rate}")


def _xml_safe(root: ET.Element) -> None:
    """Every text, tail and attribute of the tree as XML 1.0 can hold it (one pass, so no
    element added later can miss it)."""
    for element in root.iter():
        if element.text:
            element.text = xml_text(element.text)
        if element.tail:
            element.tail = xml_text(element.tail)
        for key, value in element.attrib.items():
            element.attrib[key] = xml_text(value)


def render_junit(report: Report) -> str:
    checks = run_checks(report)
    steps = report.envelope.steps if report.envelope else []
    failed = (sum(c.status is CheckStatus.FAILED for c in checks)
              + sum(s.correct is False for s in steps))
    skipped = (sum(c.status is CheckStatus.SKIPPED for c in checks)
               + sum(s.correct is None for s in steps))
    counts = {"tests": str(len(checks) + len(steps)), "failures": str(failed), "errors": "0",
              "skipped": str(skipped)}
    suites = ET.Element("testsuites", {"name": "batchprobe", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": f"batchprobe {subject(report)}",
                                                "timestamp": report.started_at, **counts})
    props = ET.SubElement(suite, "properties")
    for key, value in (("outcome", report.verdict.outcome.value), ("run_id", report.run_id),
                       ("status", report.status.value),
                       ("engine_version", report.environment.engine_version or "")):
        ET.SubElement(props, "property", name=key, value=value)
    for check in checks:
        name = f"{check.shape}.{check.kind}" if check.shape else check.kind
        case = ET.SubElement(suite, "testcase", classname=f"batchprobe.{check.group}",
                             name=name, time="0")
        if check.status is CheckStatus.FAILED:
            ET.SubElement(case, "failure", message=check.message, type=check.kind).text = (
                check.message)
        elif check.status is CheckStatus.SKIPPED:
            ET.SubElement(case, "skipped", message=check.message)
        else:
            ET.SubElement(case, "system-out").text = check.message
    for step in steps:
        _step_case(suite, step)
    message, traceback = run_error(report)
    out = [headline(report), *report.verdict.reasons, *report.warnings]
    if message:
        out.append(f"error: {message}")
    ET.SubElement(suite, "system-out").text = "\n".join(out)
    if traceback:
        ET.SubElement(suite, "system-err").text = traceback
    _xml_safe(suites)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


class JUnitRenderer:
    name = "junit"
    suffix = ".junit.xml"

    def render(self, report: Report) -> str:
        return render_junit(report)


RENDERER = JUnitRenderer()
