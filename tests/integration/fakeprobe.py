"""One probe run against an in-process fake server, shared by the fake-server integration tests."""

from __future__ import annotations

from pathlib import Path

from batchprobe.fake import FakeServerConfig, FakeServerThread
from batchprobe.probe.endpoint import url_provider
from batchprobe.probe.plan import url_arms
from batchprobe.probe.run import run_probe
from batchprobe.results import Report, RunConfig, read_report

SESSIONS = 4


def probe(tmp_path: Path, fake: FakeServerConfig, **overrides: object) -> Report:
    """The default URL plan (unless ``arms`` is given) at SESSIONS; the file on disk is checked
    to be the report returned."""
    settings: dict[str, object] = {
        "sessions": SESSIONS, "haystack_tokens": 200, "max_tokens": 24, "request_timeout_s": 20.0
    }
    settings.update(overrides)
    with FakeServerThread(fake) as server:
        config = RunConfig(base_url=server.base_url, **settings)  # type: ignore[arg-type]
        if not config.arms:
            config.arms = url_arms(config.sessions)
        output = tmp_path / "verdict.json"
        report = run_probe(config, output, url_provider(server.base_url))
    assert read_report(output) == report, "the file on disk is the final report"
    return report
