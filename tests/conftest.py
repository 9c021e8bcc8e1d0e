"""Shared fixtures: a scrubbed environment and the fake server."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _scrub_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy variable would route the tests' loopback traffic away from the local servers.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
