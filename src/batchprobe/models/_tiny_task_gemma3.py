"""The constructed llama (``_tiny_task_build``) carried over to gemma-3's layout, with its
sliding window (run under the model-tools python).

Gemma-3 differs from llama where the construction needs care:
- the embedding is multiplied by sqrt(hidden): the hidden size is 676, whose root (26) every
  engine represents exactly (mlx-lm rounds it through bfloat16);
- RMSNorm scales by (1 + w), and each sublayer's output is normalised before it joins the
  residual (``post_attention_layernorm``, ``post_feedforward_layernorm``): both outputs get a
  ballast dimension of a large constant (the values' constant channel through ``o_proj``; an
  always-on MLP unit), so the norm divides by an almost fixed RMS, and the ballast's own
  norm weight is 0, so it never reaches the residual;
- queries and keys are RMS-normalised per head (``q_norm``, ``k_norm``): a key gets a ballast
  in a pair no query uses (pair 15), so every key keeps its scale; a query's normalisation only
  rescales all of that query's scores, so its argmax stays, and ``q_norm`` is set at least as
  large as any query's RMS, so no head gets softer than it was built;
- the MLP's activation is tanh-GELU, which the construction's units (gates of +-10 and more)
  read as they read SiLU.
Layer 0 (offset heads, the asked-key head) is a sliding-window layer of ``SLIDING_WINDOW``
tokens; everything it reads lies within it. Layer 1 (recall, count) is global.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from _tiny_task_build import (  # type: ignore[import-not-found, unused-ignore]
    CONST,
    HEAD_DIM,
    INTER,
    KC,
    MAX_LEN,
    N_HEADS,
    ROPE_BASE,
    V,
)
from _tiny_task_build import HIDDEN as LLAMA_HIDDEN  # type: ignore[import-not-found, unused-ignore]

HIDDEN = 676                # 13 heads x 52; sqrt = 26, exact in bfloat16
SLIDING_WINDOW = 128        # < any recall prompt; > the 70 tokens from a question to its answer
BALLAST = 675               # the sublayer outputs' ballast dimension (never in the residual)
B_OUT = 1.0e5               # its value: the outputs' own content is <= ~200
K_BALLAST, C_K = 15, 1000.0  # a key dimension of pair 15, which no query uses
V_CONST = HEAD_DIM - 1      # the value dimension that is 1 for every token
MLP_UNIT = INTER - 1        # the always-on MLP unit that writes the ballast
LAYERS = 2


def _widened(a: np.ndarray) -> np.ndarray:
    """``a`` with each of its hidden-size axes zero-padded from llama's size to gemma3's."""
    pad = [(0, HIDDEN - n if n == LLAMA_HIDDEN else 0) for n in a.shape]
    widened: np.ndarray = np.pad(a, pad)
    return widened


def _q_bound(q: np.ndarray) -> float:
    """An upper bound of any head's query RMS: the constant channel at KC, every other
    residual dimension the projection reads at most 2 (features, flags: 0 or 1)."""
    worst = 0.0
    for h in range(N_HEADS):
        block = q[h * HEAD_DIM:(h + 1) * HEAD_DIM]
        bound = np.linalg.norm(block[:, CONST]) * KC + 2.0 * np.linalg.norm(block, axis=0).sum()
        worst = max(worst, float(bound) / math.sqrt(HEAD_DIM))
    return worst


def gemma3_weights(llama: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The llama weights as a Gemma3ForCausalLM's (names, norms, ballasts, hidden 676)."""
    root = math.sqrt(HIDDEN)
    identity = KC / root - 1.0   # an input norm that leaves the residual as it is (CONST = KC)
    passing = np.full(HIDDEN, B_OUT / root - 1.0, np.float32)
    passing[BALLAST] = -1.0      # (1 + w) = 0: the ballast stops here
    w: dict[str, np.ndarray] = {
        "model.embed_tokens.weight": _widened(llama["model.embed_tokens.weight"]) / root,
        "lm_head.weight": _widened(llama["lm_head.weight"]),
        "model.norm.weight": np.full(HIDDEN, identity, np.float32),
    }
    q_scale = max(_q_bound(llama[f"model.layers.{i}.self_attn.q_proj.weight"]) for i in range(LAYERS))
    for i in range(LAYERS):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        q, k, v, o = (_widened(llama[f"{a}{x}_proj.weight"]) for x in "qkvo")
        gate, up, down = (_widened(llama[f"{p}mlp.{x}_proj.weight"]) for x in ("gate", "up", "down"))
        if k[K_BALLAST].any() or q[:, K_BALLAST].any() or v[V_CONST].any() or o[BALLAST].any():
            raise RuntimeError(f"layer {i}: a ballast dimension is already in use")
        if gate[MLP_UNIT].any() or up[MLP_UNIT].any() or down[:, MLP_UNIT].any():
            raise RuntimeError(f"layer {i}: MLP unit {MLP_UNIT} is already in use")
        if any(q[h * HEAD_DIM:(h + 1) * HEAD_DIM][[K_BALLAST, K_BALLAST + HEAD_DIM // 2]].any()
               for h in range(N_HEADS)):
            raise RuntimeError(f"layer {i}: a query reads the key ballast's pair")
        k[K_BALLAST, CONST] = C_K / KC
        v[V_CONST, CONST] = 1.0 / KC
        for h in range(N_HEADS):
            o[BALLAST, h * HEAD_DIM + V_CONST] = B_OUT / N_HEADS
        gate[MLP_UNIT, CONST] = 20.0 / KC     # gelu(20) = 20
        up[MLP_UNIT, CONST] = 1.0 / 20.0 / KC
        down[BALLAST, MLP_UNIT] = B_OUT
        w.update({
            a + "q_proj.weight": q, a + "k_proj.weight": k, a + "v_proj.weight": v,
            a + "o_proj.weight": o,
            a + "q_norm.weight": np.full(HEAD_DIM, q_scale - 1.0, np.float32),
            a + "k_norm.weight": np.full(HEAD_DIM, C_K / math.sqrt(HEAD_DIM) - 1.0, np.float32),
            p + "mlp.gate_proj.weight": gate, p + "mlp.up_proj.weight": up,
            p + "mlp.down_proj.weight": down,
            p + "input_layernorm.weight": np.full(HIDDEN, identity, np.float32),
            p + "pre_feedforward_layernorm.weight": np.full(HIDDEN, identity, np.float32),
            p + "post_attention_layernorm.weight": passing.copy(),
            p + "post_feedforward_layernorm.weight": passing.copy(),
        })
    return {name: a.astype(np.float32) for name, a in w.items()}


def write_gemma3_config(out: Path) -> None:
    cfg = {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        "vocab_size": V, "hidden_size": HIDDEN, "intermediate_size": INTER,
        "num_hidden_layers": LAYERS, "num_attention_heads": N_HEADS, "num_key_value_heads": 1,
        "head_dim": HEAD_DIM, "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": MAX_LEN, "rms_norm_eps": 1e-6,
        "rope_theta": ROPE_BASE, "rope_local_base_freq": ROPE_BASE, "rope_scaling": None,
        "query_pre_attn_scalar": HEAD_DIM, "sliding_window": SLIDING_WINDOW,
        "sliding_window_pattern": 2, "layer_types": ["sliding_attention", "full_attention"],
        "final_logit_softcapping": None, "attn_logit_softcapping": None,
        "attention_bias": False, "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1, "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 0, "eos_token_id": 1, "do_sample": False}))
