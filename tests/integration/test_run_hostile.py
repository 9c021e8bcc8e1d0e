"""`batchprobe run` (the default plan) against a server whose every string is hostile.

Each run must end with a verdict written (never left ``running``), no traceback, bounded
memory and a small verdict; and every output must keep the server's strings as data: JUnit
that parses, markdown with no tag or link of the server's, a console with no control byte.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from junitparser import JUnitXml
from markdown_it import MarkdownIt

from hostile_server import Mode, hostile_server

MAX_RSS_MIB = 300
MAX_VERDICT_BYTES = 3 * 1024 * 1024
MAX_HTML_BYTES = 3 * 1024 * 1024
# C0 controls but tab and newline, DEL, C1 controls.
_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def _high_water_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((x for x in status.splitlines() if x.startswith("VmHWM:")), None)
    return 0 if line is None else int(line.split()[1])


def _run(argv: list[str], timeout_s: float) -> tuple[int, bytes, bytes, int]:
    """Run ``batchprobe ARGV``; exit code, stdout, stderr and peak RSS (VmHWM, polled: it
    starts afresh at exec, where ru_maxrss would count the pytest process forked from)."""
    proc = subprocess.Popen([sys.executable, "-m", "batchprobe", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = 0
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        peak = max(peak, _high_water_kib(proc.pid))
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"batchprobe {' '.join(argv[:2])} ran past {timeout_s} s")
        time.sleep(0.02)
    out, err = proc.communicate()
    return proc.returncode, out, err, peak


def _assert_markdown_is_ours(text: str) -> None:
    md = MarkdownIt("commonmark").enable("table")
    html = md.render(text)
    assert "<img" not in html and "<script" not in html, "a server tag in the markdown"
    assert html.count("<details>") == html.count("</details>"), "a server </details>"
    assert 'href="javascript' not in html.lower(), "a server javascript: link"
    for token in md.parse(text):
        for child in token.children or ():
            assert child.type != "link_open", f"a link in the markdown: {child}"
            if child.type == "html_inline":
                assert re.fullmatch(r"</?(details|summary)>", child.content), child.content


def _assert_console(name: str, data: bytes) -> None:
    found = _CONTROL.findall(data)
    assert not found, f"{name}: control bytes {found[:5]} reached the console"


# The drip mode lowers --max-tokens and --haystack-tokens for time only: the same plan,
# shapes, roles and depths, with shorter prompts and answers.
_EXTRA: dict[str, list[str]] = {"drip": ["--max-tokens", "16", "--haystack-tokens", "200"]}


@pytest.mark.parametrize("mode", ["text", "surrogate", "surrogate_model", "big", "flood", "drip"])
def test_the_default_plan_against_a_hostile_server(mode: Mode, tmp_path: Path) -> None:
    verdict = tmp_path / "verdict.json"
    with hostile_server(mode) as server:
        code, out, err, peak_kib = _run(
            ["run", "--base-url", server.url, "--output", str(verdict), "--progress", "plain",
             "--report", "html,md,junit,console", *_EXTRA.get(mode, [])],
            timeout_s=300,
        )
    assert b"internal error" not in err and b"Traceback" not in err, err[-4000:].decode()
    saved = json.loads(verdict.read_text(encoding="utf-8"))
    # The exit code is the verdict's: 0 PASS, 1 FAIL, 2 anything else.
    outcome = saved["verdict"]["outcome"]
    assert code == {"PASS": 0, "FAIL": 1}.get(outcome, 2), (code, outcome, err[-2000:])
    assert saved["status"] != "running"
    assert saved["status"] in ("ok", "error"), saved["status"]
    if mode != "surrogate_model":
        assert saved["status"] == "ok", saved.get("error")
    assert verdict.stat().st_size < MAX_VERDICT_BYTES, verdict.stat().st_size
    assert peak_kib < MAX_RSS_MIB * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"
    assert (tmp_path / "verdict.html").stat().st_size < MAX_HTML_BYTES
    if mode in ("surrogate", "big", "flood"):
        kinds = {s["error"]["kind"] for arm in saved["arms"] for s in arm["sessions"]
                 if s.get("error")}
        wanted = {"surrogate": "malformed_stream", "big": "exceeded_max_tokens",
                  "flood": "exceeded_max_tokens"}[mode]
        assert wanted in kinds, kinds

    junit = tmp_path / "verdict.junit.xml"
    ET.parse(junit)  # raises on ESC, NUL or a surrogate in the model id or a message
    assert list(JUnitXml.fromfile(str(junit)))
    _assert_markdown_is_ours((tmp_path / "verdict.md").read_text(encoding="utf-8"))

    _assert_console("run stdout", out)
    _assert_console("run stderr (progress)", err)
    _assert_console("verdict.txt", (tmp_path / "verdict.txt").read_bytes())
    code, shown, report_err, _ = _run(["report", str(verdict)], timeout_s=120)
    assert code == 0, report_err[-2000:]
    _assert_console("batchprobe report", shown + report_err)
