"""Client timeouts, in seconds."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Timeouts(BaseModel):
    """How long the client waits before it classifies a request as timed out."""

    # Frozen so that one default instance can be shared safely as a default argument.
    model_config = ConfigDict(extra="forbid", frozen=True)

    connect: float = Field(default=10.0, gt=0, description="TCP connect to the server.")
    read: float = Field(
        default=120.0,
        gt=0,
        description="Longest silence allowed while waiting for the reply or between stream chunks.",
    )
    total: float = Field(default=900.0, gt=0, description="Whole request, connect to last byte.")
