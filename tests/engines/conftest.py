"""Engine test fixtures (the real engines themselves are in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def no_cache(tmp_path: Path) -> Path:
    """An empty cache directory (nothing installed)."""
    return tmp_path / "cache"
