"""JUnit XML: one test case per check, so any CI lists batchprobe's results natively."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from batchprobe.report._cells import headline, subject
from batchprobe.report._error import run_error
from batchprobe.results.checks import CheckStatus, run_checks
from batchprobe.results.models import Report


def render_junit(report: Report) -> str:
    checks = run_checks(report)
    failed = sum(c.status is CheckStatus.FAILED for c in checks)
    skipped = sum(c.status is CheckStatus.SKIPPED for c in checks)
    counts = {"tests": str(len(checks)), "failures": str(failed), "errors": "0",
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
        case = ET.SubElement(suite, "testcase", classname=f"batchprobe.{check.group}",
                             name=check.kind, time="0")
        if check.status is CheckStatus.FAILED:
            ET.SubElement(case, "failure", message=check.message, type=check.kind).text = (
                check.message)
        elif check.status is CheckStatus.SKIPPED:
            ET.SubElement(case, "skipped", message=check.message)
        else:
            ET.SubElement(case, "system-out").text = check.message
    message, traceback = run_error(report)
    out = [headline(report), *report.verdict.reasons, *report.warnings]
    if message:
        out.append(f"error: {message}")
    ET.SubElement(suite, "system-out").text = "\n".join(out)
    if traceback:
        ET.SubElement(suite, "system-err").text = traceback
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


class JUnitRenderer:
    name = "junit"
    suffix = ".junit.xml"

    def render(self, report: Report) -> str:
        return render_junit(report)


RENDERER = JUnitRenderer()
