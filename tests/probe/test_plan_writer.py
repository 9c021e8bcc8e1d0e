import json

import pytest

from batchprobe.errors import ConfigError
from batchprobe.probe.plan import engine_arms, parse_arms, url_arms
from batchprobe.probe.state import new_report
from batchprobe.results import SCHEMA_VERSION, RunConfig, json_schema, read_report, write_report


def test_default_plans():
    assert [(a.name, a.concurrency) for a in url_arms(8)] == [("serial", 1), ("concurrent", 8)]
    assert [a.name for a in engine_arms(8)] == ["simple@1", "batching@1", "batching@8"]


def test_parse_arms():
    arms = parse_arms("simple@1, batching@8", managed=True)
    assert [(a.mode, a.concurrency) for a in arms] == [("simple", 1), ("batching", 8)]
    with pytest.raises(ConfigError, match="--arms.*NAME@N"):
        parse_arms("fast", managed=False)
    with pytest.raises(ConfigError, match="simple, batching"):
        parse_arms("turbo@2", managed=True)
    with pytest.raises(ConfigError, match="once"):
        parse_arms("a@1,a@1", managed=False)
    with pytest.raises(ConfigError, match="at least 1"):
        parse_arms("a@0", managed=False)


def test_atomic_write_roundtrip_leaves_no_temp(tmp_path):
    report = new_report(RunConfig(base_url="http://x"))
    path = tmp_path / "sub" / "verdict.json"
    write_report(report, path)
    assert read_report(path) == report
    assert [p.name for p in path.parent.iterdir()] == ["verdict.json"]
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION and data["status"] == "running"


def test_schema_has_the_verdict():
    schema = json_schema()
    assert "verdict" in schema["properties"] and "schema_version" in schema["properties"]
