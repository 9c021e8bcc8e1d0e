"""Run with vllm-mlx 0.3.0's python: start its MLLM batch generator (which installs vllm-mlx's
own Gemma-4 attention patch) on the tiny model and report which Attention.__call__ is left."""

from __future__ import annotations

import json
import sys

from mlx_vlm import load  # type: ignore[import-not-found]
from mlx_vlm.models.gemma4 import language  # type: ignore[import-not-found]
from vllm_mlx.mllm_batch_generator import MLLMBatchGenerator  # type: ignore[import-not-found]

model, processor = load(sys.argv[1])
MLLMBatchGenerator(model, processor)
call = language.Attention.__call__
print(
    json.dumps(
        {
            "module": call.__module__,
            "qualname": call.__qualname__,
            "marked": bool(getattr(call, "_batch_patched", False)),
        }
    )
)
