"""One probe run against an in-process fake server, shared by the fake-server integration tests."""

from __future__ import annotations

from pathlib import Path

from batchprobe.fake import FakeServerConfig, FakeServerProcess, FakeServerThread
from batchprobe.judge import final_pass
from batchprobe.probe.endpoint import url_provider
from batchprobe.probe.plan import url_arms
from batchprobe.probe.run import run_probe
from batchprobe.results import Report, RunConfig, read_report

from .judgeprobe import judgement

SESSIONS = 4


def probe(tmp_path: Path, fake: FakeServerConfig, **overrides: object) -> Report:
    """The default URL plan (unless ``arms`` is given) at SESSIONS against an in-process fake;
    the file on disk is checked to be the report returned."""
    with FakeServerThread(fake) as server:
        return _probe_url(tmp_path, server.base_url, overrides)


def probe_process(tmp_path: Path, fake_args: list[str], **overrides: object) -> Report:
    """As ``probe``, against ``batchprobe fake-server FAKE_ARGS`` in its own process, for tests
    of timing that an in-process server would distort by sharing the GIL with the client."""
    with FakeServerProcess(*fake_args) as server:
        return _probe_url(tmp_path, server.base_url, overrides)


def _probe_url(tmp_path: Path, base_url: str, overrides: dict[str, object]) -> Report:
    settings: dict[str, object] = {
        "sessions": SESSIONS, "haystack_tokens": 200, "max_tokens": 24, "request_timeout_s": 20.0
    }
    settings.update(overrides)
    config = RunConfig(base_url=base_url, **settings)  # type: ignore[arg-type]
    if not config.arms:
        config.arms = url_arms(config.sessions)
    output = tmp_path / "verdict.json"
    report = run_probe(config, output, url_provider(base_url))
    on_disk = read_report(output)
    assert on_disk == report, "the file on disk is the final report"
    final_pass(on_disk)
    assert judgement(on_disk) == judgement(report), "judged again from the file alone, the same"
    return report
