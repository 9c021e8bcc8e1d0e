"""A report killed in the middle of its write leaves the old file whole; the next write of the
same file removes the dead writer's temporary file (and only that)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from batchprobe.cli import main
from batchprobe.files import STALE_AFTER_S, remove_stale, write_atomic

# In a child process: the real `batchprobe report --html` path, with the atomic helper's file
# writing half of the document, saying so, and then hanging until it is killed.
_CHILD = r"""
import os, sys, time
import batchprobe.files as files

verdict, target, marker = sys.argv[1:4]
real_fdopen = os.fdopen


class HalfThenHang:
    def __init__(self, handle):
        self.handle = handle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.handle.__exit__(*exc)

    def write(self, data):
        self.handle.write(data[: len(data) // 2])
        self.handle.flush()
        os.fsync(self.handle.fileno())
        with open(marker, "w") as note:
            note.write(str(len(data)))
        time.sleep(3600)


files.os.fdopen = lambda fd, *a, **k: HalfThenHang(real_fdopen(fd, *a, **k))
from batchprobe.cli import main
main(["report", verdict, "--html", target])
"""


def _temps(folder: Path, name: str) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(f".{name}.")
                  and p.name.endswith(".tmp"))


def _backdate(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def test_a_kill_inside_the_write_keeps_the_old_report_and_the_next_write_cleans_up(
    pass_verdict: Path, tmp_path: Path
) -> None:
    target, marker = tmp_path / "report.html", tmp_path / "marker"
    old = b"<!DOCTYPE html><p>the previous report</p>\n" * 20_000  # ~860 KB, whole
    target.write_bytes(old)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(pass_verdict), str(target),
                              str(marker)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() or not marker.read_text():
            assert child.poll() is None, child.stderr.read() if child.stderr else ""
            assert time.monotonic() < deadline, "the child never reached the write"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    assert target.read_bytes() == old, "the old report is byte-identical"
    (stale,) = _temps(tmp_path, "report.html")
    full = int(marker.read_text())
    assert stale.stat().st_size == full // 2 > 10_000, "the kill landed inside the write"

    # A fresh leftover may be a live writer's: the next write keeps it...
    result = CliRunner().invoke(main, ["report", str(pass_verdict), "--html", str(target)],
                                env={"GITHUB_STEP_SUMMARY": ""})
    assert result.exit_code == 0, result.output
    assert target.read_bytes().startswith(b"<!DOCTYPE html>") and target.stat().st_size == full
    assert _temps(tmp_path, "report.html") == [stale]
    # ...and once it has not moved for STALE_AFTER_S, the next write removes it.
    _backdate(stale, STALE_AFTER_S + 1)
    result = CliRunner().invoke(main, ["report", str(pass_verdict), "--html", str(target)],
                                env={"GITHUB_STEP_SUMMARY": ""})
    assert result.exit_code == 0, result.output
    assert _temps(tmp_path, "report.html") == []
    assert target.stat().st_size == full


def test_only_the_targets_own_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "v.json"
    ours = [tmp_path / ".v.json.0123abcd.tmp", tmp_path / ".v.json.deadbeef.tmp"]
    others = [
        tmp_path / ".v.json.0123ABCD.tmp",  # not lowercase hex: not atomic_path's name
        tmp_path / ".v.json.0123abc.tmp",  # 7 digits
        tmp_path / ".v.json.0123abcde.tmp",  # 9 digits
        tmp_path / ".v.json.0123abcd.tmp.bak",
        tmp_path / "v.json.0123abcd.tmp",  # no leading dot
        tmp_path / ".w.json.0123abcd.tmp",  # another target's
        tmp_path / ".xv.json.0123abcd.tmp",
    ]
    for path in [*ours, *others]:
        path.write_text("leftover")
        _backdate(path, STALE_AFTER_S + 60)
    folder_named_like_ours = tmp_path / ".v.json.aaaaaaaa.tmp"
    folder_named_like_ours.mkdir()
    _backdate(folder_named_like_ours, STALE_AFTER_S + 60)
    link = tmp_path / ".v.json.bbbbbbbb.tmp"
    link.symlink_to(others[0])
    _backdate(link, STALE_AFTER_S + 60)
    fresh = tmp_path / ".v.json.cccccccc.tmp"
    fresh.write_text("a live writer's, just written")
    (tmp_path / "sub").mkdir()
    deeper = tmp_path / "sub" / ".v.json.dddddddd.tmp"
    deeper.write_text("another folder's")
    _backdate(deeper, STALE_AFTER_S + 60)

    write_atomic(target, "new")
    assert target.read_text() == "new"
    assert not any(p.exists() for p in ours)
    assert all(p.exists() for p in [*others, fresh, deeper])
    assert folder_named_like_ours.is_dir() and link.is_symlink()
    assert remove_stale(target) == []


def test_the_staleness_rule_goes_by_the_time_untouched(tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    temp = tmp_path / ".r.html.00000000.tmp"
    temp.write_text("x")
    now = temp.stat().st_mtime
    assert remove_stale(target, now=now + STALE_AFTER_S - 1) == []
    assert remove_stale(target, now=now - 3600) == [], "a clock behind the file's keeps it"
    assert remove_stale(target, now=now + STALE_AFTER_S + 1) == [temp]
    assert not temp.exists()
