"""JSON with orjson when installed (several times faster per SSE event), stdlib json otherwise."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

loads: Callable[[bytes | str], Any]
dumps: Callable[[Any], bytes]

try:
    import orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    loads = json.loads

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

else:
    # Bound directly, not wrapped: loads runs once per streamed event.
    loads = orjson.loads
    dumps = orjson.dumps


# orjson.JSONDecodeError and a UnicodeDecodeError from json.loads(bytes) are both ValueErrors.
JSONDecodeError = ValueError

__all__ = ["JSONDecodeError", "dumps", "loads"]
