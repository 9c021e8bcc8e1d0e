"""Each public package's __all__ names exactly its public members."""

from __future__ import annotations

import importlib
import types

import pytest

PACKAGES = [
    "batchprobe.bridge",
    "batchprobe.client",
    "batchprobe.engines",
    "batchprobe.fake",
    "batchprobe.judge",
    "batchprobe.models",
    "batchprobe.patches",
    "batchprobe.probe",
    "batchprobe.report",
    "batchprobe.results",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_matches_public_members(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(module.__all__)
    assert len(exported) == len(module.__all__), "duplicates in __all__"
    for member in exported:
        assert hasattr(module, member), f"{name}.__all__ names missing {member}"
    public = {
        key
        for key, value in vars(module).items()
        if not key.startswith("_")
        and not isinstance(value, types.ModuleType)
        and key != "annotations"
    }
    assert public <= exported, f"public but not in __all__: {sorted(public - exported)}"
