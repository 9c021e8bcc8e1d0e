"""What the client itself did during an arm: its processes, its connections, how far its
event loops lagged, and whether its timings can be taken as the server's."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from batchprobe.client._lag import LoopLag


class ClientHealth(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    procs: int = Field(description="Client processes that sent the arm's requests.")
    connections: Literal["reuse", "fresh"] = Field(
        description="reuse: kept-alive connections; fresh: one per request, once the server "
        "showed it closes them (connections_reason says how)."
    )
    connections_reason: str | None = None
    reconnects: int = Field(
        default=0,
        description="Requests sent a second time because the first send provably never reached "
        "the server (each session's reconnect says why).",
    )
    loop_lag: list[LoopLag] = Field(
        default_factory=list, description="Per process (the parent first), over the arm."
    )
    lag_threshold_ms: float
    trusted: bool = Field(
        description="Every process's busy loop lag p99 within lag_threshold_ms: TTFT and ITL "
        "are the server's, not the client's own queueing."
    )
