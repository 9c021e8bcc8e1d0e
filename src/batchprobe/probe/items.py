"""The run's work items, built once (recall haystacks sized with the server's tokenizer)."""

from __future__ import annotations

from batchprobe.client import OpenAIClient
from batchprobe.probe.calibrate import calibrate_chars_per_token
from batchprobe.results.models import RunConfig
from batchprobe.workload.decode import build_decode_items
from batchprobe.workload.haystack import DEFAULT_CHARS_PER_TOKEN
from batchprobe.workload.items import WorkItem
from batchprobe.workload.recall import build_recall_items


async def build_items(
    cfg: RunConfig, run_id: str, client: OpenAIClient
) -> tuple[list[WorkItem], str | None]:
    """(every item of every workload, a warning when haystack sizing fell back to an estimate)."""
    items: list[WorkItem] = []
    note = None
    if "recall" in cfg.workloads:
        cpt, note = await calibrate_chars_per_token(client, run_id, cfg.prompt_style)
        items += build_recall_items(
            run_id=run_id,
            sessions=cfg.sessions,
            haystack_tokens=cfg.haystack_tokens,
            prompt_style=cfg.prompt_style,
            max_tokens=cfg.recall_max_tokens,
            seed=cfg.seed,
            chars_per_token=cpt or DEFAULT_CHARS_PER_TOKEN,
        )
    if "decode" in cfg.workloads:
        items += build_decode_items(
            run_id=run_id,
            sessions=cfg.sessions,
            max_tokens=cfg.max_tokens,
            prompt_style=cfg.prompt_style,
            seed=cfg.seed,
        )
    return items, note
