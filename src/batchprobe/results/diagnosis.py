"""A diagnosis: a failure explained from the server log and error bodies."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Diagnosis(BaseModel):
    """One known issue (or an unknown failure) matched against the evidence."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    issue_id: str = Field(description="Stable id, e.g. 'vllm-mlx-gemma4-shared-kv'; 'unknown' else.")
    title: str
    known: bool = Field(description="True when a known-issue signature matched.")
    evidence: list[str] = Field(default_factory=list, description="Log lines / bodies that matched.")
    explanation: str = ""
    remedy: str = ""
    fixed_in: str | None = Field(default=None, description="First engine version with the fix.")
    patch: str | None = Field(default=None, description="batchprobe patch that answers it.")
    is_bug: bool = Field(default=True, description="False for by-design behaviour (e.g. 503 busy).")
