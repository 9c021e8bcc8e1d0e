"""The public surface of batchprobe.engines is exactly its __all__."""

from __future__ import annotations

from batchprobe import engines, models


def test_all_names_exist_and_public_members_are_listed() -> None:
    for module in (engines, models):
        assert all(hasattr(module, name) for name in module.__all__)
        public = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and getattr(value, "__module__", module.__name__).startswith(module.__name__)
            and not isinstance(value, type(engines))
        }
        assert public <= set(module.__all__), public - set(module.__all__)
