"""Client timeouts, in seconds, and the streamed reply's byte-rate floor: every bound a
request has, declared once.

* ``connect``: the TCP connect (10 s).
* ``total``: the whole request, connect to last byte (``--request-timeout``, 300 s in a run).
  The wait for the first token, however long a server prefills or queues, is bounded only by
  it.
* ``read``: the longest silence, before the reply or between its chunks; by default the total
  itself, so no shorter limit hides under ``--request-timeout``. One no shorter than the total
  is not a limit of its own: a request silent to the end is always ``total_timeout``.
* the byte-rate floor, for a streamed reply once its first token came: every
  ``floor_window`` seconds (60) it must have delivered at least ``floor_bytes`` (128) more
  bytes, else the request ends as ``read_timeout`` ("streaming stalled"). A server that drips a
  byte a second ends at most a window after its first token instead of running to the total.
  A healthy stream is far above it: one token chunk is 30 to 400 bytes, and a slow CPU engine
  decoding 8 tokens/s per stream sends over a kilobyte a second; even one chunk a minute
  (llama.cpp's, about 230 bytes) passes. Before the first token (prefill, a queue, a proxy's
  keep-alive comments) it does not apply.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_CONNECT_S = 10.0
DEFAULT_TOTAL_S = 900.0
FLOOR_WINDOW_S = 60.0
FLOOR_BYTES = 128


class Timeouts(BaseModel):
    """How long the client waits before it classifies a request as timed out."""

    # Frozen so that one default instance can be shared safely as a default argument.
    model_config = ConfigDict(extra="forbid", frozen=True)

    connect: float = Field(default=DEFAULT_CONNECT_S, gt=0, description="TCP connect to the server.")
    read: float = Field(
        default=DEFAULT_TOTAL_S,
        gt=0,
        description="Longest silence allowed while waiting for the reply or between stream "
        "chunks; when not given, the total (no shorter limit than the request's own).",
    )
    total: float = Field(
        default=DEFAULT_TOTAL_S, gt=0, description="Whole request, connect to last byte."
    )
    floor_window: float = Field(
        default=FLOOR_WINDOW_S,
        gt=0,
        description="A streamed reply, once its first token came, must deliver floor_bytes "
        "more bytes in every window of this many seconds.",
    )
    floor_bytes: int = Field(
        default=FLOOR_BYTES,
        ge=0,
        description="Bytes a streamed reply must deliver per floor_window after its first "
        "token (0: no floor).",
    )

    @model_validator(mode="before")
    @classmethod
    def _read_defaults_to_total(cls, data: Any) -> Any:
        if isinstance(data, dict) and "read" not in data and "total" in data:
            return {**data, "read": data["total"]}
        return data
