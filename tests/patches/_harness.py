"""Run inside an mlx-vlm venv: ``python _harness.py SCENARIO MODEL_DIR PATCH_FILE``.

Loads the patch module by file path (as the engine shim does: batchprobe is not installed in
these venvs), runs one scenario on the tiny gemma-4 model and prints one JSON object.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

STEPS = 10
# Token ids from the tiny model's vocabulary: prompt B is longer than the sliding window (8), so
# the sliding layers' rotating caches wrap; prompt A is shorter, so the batch is left-padded.
PROMPT_A = [2, 10, 102, 155, 152, 115]
PROMPT_B = [2, 10, 102, 153, 115, 102, 154, 106, 102, 196, 71, 104, 11, 10, 165]
# For the mask check the padding must fall outside the window, where trimming a full-attention
# mask gives exactly the sliding layers' mask (all of their cached keys are valid).
PROMPT_C = [2, 10, 120, 121, 122, 102, 196, 71, 104, 60, 11, 10, 165]


def load_patch(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("_batchprobe_patch_gemma4_attention", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def greedy_single(lm: Any, mx: Any, prompt: list[int]) -> list[int]:
    cache = lm.make_cache()
    logits = lm(mx.array([prompt]), cache=cache).logits
    out: list[int] = []
    for _ in range(STEPS):
        token = int(mx.argmax(logits[0, -1]).item())
        out.append(token)
        logits = lm(mx.array([[token]]), cache=cache).logits
    return out


def batch_cache(lm: Any, padding: list[int]) -> list[Any]:
    from mlx_vlm.models.cache import BatchKVCache, BatchRotatingKVCache, RotatingKVCache  # type: ignore[import-not-found]

    caches = []
    for c in lm.make_cache():
        if isinstance(c, RotatingKVCache):
            caches.append(BatchRotatingKVCache(c.max_size, padding))
        else:
            caches.append(BatchKVCache(padding))
    return caches


def greedy_batch(lm: Any, mx: Any, cache: list[Any], logits: Any) -> list[list[int]]:
    rows: list[list[int]] = [[] for _ in range(logits.shape[0])]
    for _ in range(STEPS):
        tokens = mx.argmax(logits[:, -1], axis=-1)
        for row, token in zip(rows, tokens.tolist()):
            row.append(int(token))
        logits = lm(tokens[:, None], cache=cache).logits
    return rows


def left_padded(mx: Any, prompts: list[list[int]]) -> tuple[Any, list[int]]:
    width = max(len(p) for p in prompts)
    padding = [width - len(p) for p in prompts]
    return mx.array([[0] * pad + p for pad, p in zip(padding, prompts)]), padding


def scenario_equivalence(lm: Any, mx: Any, patch: Any) -> dict[str, Any]:
    applied = patch.patch_gemma4_attention_for_batching()
    prompts = [PROMPT_A, PROMPT_B]
    single = [greedy_single(lm, mx, p) for p in prompts]
    tokens, padding = left_padded(mx, prompts)
    cache = batch_cache(lm, padding)
    batched = greedy_batch(lm, mx, cache, lm(tokens, cache=cache).logits)
    merged = merged_caches_decode(lm, mx, prompts)
    # Control: the same batch with the offset taken by reference (what the snapshot prevents).
    patch._snapshot_offset = lambda _mx, c: 0 if c is None else c.offset
    cache = batch_cache(lm, padding)
    unsnapshotted = greedy_batch(lm, mx, cache, lm(tokens, cache=cache).logits)
    return {
        "applied": applied,
        "single": single,
        "batched": batched,
        "merged": merged,
        "unsnapshotted": unsnapshotted,
    }


def merged_caches_decode(lm: Any, mx: Any, prompts: list[list[int]]) -> list[list[int]]:
    """Prefill each prompt alone, merge the caches into one batch cache, decode together."""
    per_request, last = [], []
    for prompt in prompts:
        cache = lm.make_cache()
        last.append(lm(mx.array([prompt]), cache=cache).logits[:, -1:])
        per_request.append(cache)
    merged = [layer[0].merge(list(layer)) for layer in zip(*per_request)]
    return greedy_batch(lm, mx, merged, mx.concatenate(last, axis=0))


def scenario_oversized_mask(lm: Any, mx: Any, patch: Any, apply: bool) -> dict[str, Any]:
    applied = patch.patch_gemma4_attention_for_batching() if apply else False
    prompts = [PROMPT_C, PROMPT_B]
    tokens, padding = left_padded(mx, prompts)
    ref_cache, big_cache = batch_cache(lm, padding), batch_cache(lm, padding)
    ref_logits = lm(tokens, cache=ref_cache).logits
    big_logits = lm(tokens, cache=big_cache).logits
    full = next(c for c in big_cache if not hasattr(c, "max_size"))
    ref_rows: list[list[int]] = [[] for _ in prompts]
    big_rows: list[list[int]] = [[] for _ in prompts]
    max_diff = 0.0
    for _ in range(STEPS):
        step = mx.argmax(ref_logits[:, -1], axis=-1)[:, None]
        # One mask for every layer, sized for the full-attention keys (as a batch builds it for
        # its longest prompt): wider than the sliding layers' capped keys.
        mask = full.make_mask(1, return_array=True)
        try:
            big_logits = lm(step, cache=big_cache, mask=mask).logits
        except ValueError as exc:
            return {"applied": applied, "error": str(exc), "mask_width": mask.shape[-1]}
        ref_logits = lm(step, cache=ref_cache).logits
        max_diff = max(max_diff, float(mx.max(mx.abs(big_logits - ref_logits)).item()))
        for rows, logits in ((ref_rows, ref_logits), (big_rows, big_logits)):
            for row, token in zip(rows, mx.argmax(logits[:, -1], axis=-1).tolist()):
                row.append(int(token))
    return {
        "applied": applied,
        "error": None,
        "mask_width": mask.shape[-1],
        "reference": ref_rows,
        "oversized": big_rows,
        "max_abs_logit_diff": max_diff,
    }


def scenario_idempotence(lm: Any, mx: Any, patch: Any) -> dict[str, Any]:
    from mlx_vlm.models.gemma4 import language  # type: ignore[import-not-found]

    first = patch.patch_gemma4_attention_for_batching()
    installed = language.Attention.__call__
    second = patch.patch_gemma4_attention_for_batching()
    same = language.Attention.__call__ is installed

    # A competing patch (vllm-mlx 0.3.0 marks the class the same way) is replaced, not trusted.
    def foreign(self: Any, x: Any, mask: Any = None, cache: Any = None) -> Any:
        raise AssertionError("foreign patch called")

    language.Attention.__call__ = foreign
    third = patch.patch_gemma4_attention_for_batching()
    return {
        "first": first,
        "second": second,
        "unchanged_by_second": same,
        "marker": getattr(language.Attention, patch.MARKER, None),
        "third_after_foreign": third,
        "foreign_replaced": language.Attention.__call__ is not foreign,
        "output": greedy_single(lm, mx, PROMPT_B),
    }


def scenario_unsupported(patch: Any) -> dict[str, Any]:
    from mlx_vlm.models.gemma4 import language

    before = language.Attention.__call__
    result = patch.patch_gemma4_attention_for_batching()
    return {
        "result": result,
        "unchanged": language.Attention.__call__ is before,
        "marker": getattr(language.Attention, patch.MARKER, None),
    }


def main() -> None:
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    scenario, model_dir, patch_file = sys.argv[1:4]
    patch = load_patch(patch_file)
    if scenario == "unsupported":
        result = scenario_unsupported(patch)
    else:
        import mlx.core as mx  # type: ignore[import-not-found]
        from mlx_vlm import load  # type: ignore[import-not-found]

        model, _processor = load(model_dir)
        lm = model.language_model
        if scenario == "equivalence":
            result = scenario_equivalence(lm, mx, patch)
        elif scenario == "idempotence":
            result = scenario_idempotence(lm, mx, patch)
        else:
            result = scenario_oversized_mask(lm, mx, patch, apply=scenario == "mask-patched")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
