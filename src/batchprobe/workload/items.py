"""A work item: one prompt for one session, the same in every arm."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class WorkItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: Literal["recall", "decode"]
    session: int = Field(ge=0)
    prompt: str
    max_tokens: int = Field(ge=1)
    expected_code: str | None = None
    depth: float | None = Field(default=None, description="recall: needle position, 0 = top")
