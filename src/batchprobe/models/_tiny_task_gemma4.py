"""The constructed gemma-3 (``_tiny_task_gemma3``) carried over to gemma-4's layout, with its
shared KV (run under the model-tools python).

Four layers, sliding/full twice, the last two reading the KV of the first two
(``num_kv_shared_layers`` 2), and the tiny vision tower of ``tiny_gemma4`` so that the engines
that route Gemma-4 through a multimodal path (vllm-mlx via mlx-vlm) take it. The construction is
split so that the sharing carries the tasks:
- layer 0 (sliding, window ``SLIDING_WINDOW``): gemma-3's layer 0, the offset and asked-key heads;
- layer 1 (full): computes the recall and count heads' keys and values and writes nothing
  (no query, ``o_proj`` and MLP zero);
- layer 2 (sliding, layer 0's KV): writes nothing;
- layer 3 (full, layer 1's KV): the recall and count heads' queries, their output and the
  +1/carry MLP. A server that hands a shared layer another request's KV, or stale positions,
  answers with another session's code or a broken count.

Gemma-4 differs from gemma-3 where the construction needs care:
- a norm's weight is used as is (gemma-3 adds 1);
- the attention scale is 1 (gemma-3: 1/sqrt(head_dim)): ``q_norm`` takes the factor;
- values are RMS-normalised per head without a weight (``v_norm``): the values' constant channel
  carries a large constant ``C_V``, so every value is divided by an almost fixed RMS, and
  ``o_proj`` is scaled back;
- the embedding is tied to the output head: a token's row is gemma-3's embedding plus ``EPS``
  at its own logit dimension, and the final norm passes only the logit block (scaled by
  1/``EPS``), so the embedding part never reaches a logit and the input's own mark adds
  ``EPS * sqrt(hidden)`` (0.026) to the current token's;
- the per-layer input embeddings and their projections are zero (they add nothing);
- the vocabulary gains gemma-4's image and audio specials (never in a text prompt);
- vllm-mlx's multimodal path tokenizes a completion prompt without special tokens, so without
  ``<s>``, the heads' sink when nothing matches. A count prompt asks no key, and the recall head
  then spreads over every digit of the prompt: its output goes through the MLP instead of
  straight to the logits (``REC``), each unit on above ``REC_ON`` of a token's worth, so the
  spread writes nothing and a real recall what it did. After a comma the count head finds a
  digit instead of its sink: the comma -> space unit gets twice its logit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from _tiny_task_build import (  # type: ignore[import-not-found, unused-ignore]
    CONST,
    G_A,
    HEAD_DIM,
    INTER,
    K_SILU,
    KC,
    MAX_LEN,
    N_HEADS,
    OUT,
    ROPE_BASE,
    TOK,
    V,
    fdim,
)
from _tiny_task_gemma3 import (  # type: ignore[import-not-found, unused-ignore]
    BALLAST,
    HIDDEN,
    SLIDING_WINDOW,
    V_CONST,
    gemma3_weights,
)
from tiny_gemma4 import (  # type: ignore[import-not-found, unused-ignore]
    PROCESSOR_TOKENS,
    VISION_CONFIG,
    _vision_shapes,
    _write_json,
    write_processor_files,
)

GEMMA_SPECIALS = ["<boi>", "<eoi>", "<image_soft_token>", "<audio_soft_token>", "<boa>", "<eoa>"]
V4 = V + len(GEMMA_SPECIALS)
LAYERS = 4
SHARED = 2                  # layers 2 and 3 read the KV of layers 0 and 1
PLE = 16                    # hidden_size_per_layer_input (all zero)
C_V = 1000.0                # the values' constant channel before v_norm
EPS = 1.0e-3                # a token's own logit dimension in the tied embedding
REC = 600                   # the recall head's outputs, in dimensions gemma-3's layout leaves free
# A recall unit is on above a quarter of a token's worth: a recall copies ~1 (the comma after
# the chat count's first number 1/2); a head with no sink spreads < 0.1 over each digit.
REC_ON = 0.25
LAYER_TYPES = ["sliding_attention", "full_attention"] * 2
# gemma-3's layer whose parts each gemma-4 layer takes: keys/values, query/output/MLP.
KV_FROM = {0: 0, 1: 1}
QO_FROM = {0: 0, 3: 1}
_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
          "post_feedforward_layernorm")


def _rescaled_o(o: np.ndarray) -> np.ndarray:
    """``o_proj`` for values that v_norm divided by their RMS (sqrt(C_V^2 + ...)/8 ~ C_V/8):
    the content channels come back by C_V/8, the constant one (now 8) by 1/8."""
    root = math.sqrt(HEAD_DIM)
    scaled = o * (C_V / root)
    for h in range(N_HEADS):
        col = h * HEAD_DIM + V_CONST
        scaled[:, col] = o[:, col] / root
    return scaled


def _without_bos(g3: dict[str, np.ndarray], o: np.ndarray, mlp: dict[str, np.ndarray]) -> None:
    """Layer 3 for prompts without ``<s>``: the recall head's (head 0's) logit writes go through
    ``REC`` and a unit each of the MLP, on above ``REC_ON`` of a token's worth (half a token's
    worth writes the logit it wrote before, a whole one 1.5 times it); the comma -> space unit
    writes twice its logit."""
    rows, cols = np.nonzero(o[OUT:OUT + V, :HEAD_DIM])
    gate, up, down = mlp["gate"], mlp["up"], mlp["down"]
    free = [u for u in range(INTER) if not (gate[u].any() or up[u].any() or down[:, u].any())]
    used = [x for x in g3.values() if x.ndim == 2 and HIDDEN in x.shape]
    block = slice(REC, REC + len(rows))
    if len(rows) > len(free) or block.stop > BALLAST or any(
            (x[:, block] if x.shape[1] == HIDDEN else x[block]).any() for x in used):
        raise RuntimeError("no room to route the recall head through the MLP")
    for j, (r, c, u) in enumerate(zip(rows, cols, free)):
        o[REC + j, c] = o[OUT + r, c] / G_A
        o[OUT + r, c] = 0.0
        gate[u, REC + j] = K_SILU
        gate[u, CONST] = -K_SILU * REC_ON / KC
        up[u, CONST] = 1.0 / K_SILU / KC
        down[OUT + r, u] = 2.0 * G_A
    # After a comma the count head, with no sink, finds a digit as sure as the space it should
    # leave to the comma -> space unit (7.5 each): the space gets twice its logit.
    space = [u for u in range(INTER) if gate[u, fdim(0, "comma")] and down[OUT + TOK[" "], u]]
    if len(space) != 1:
        raise RuntimeError(f"{len(space)} comma -> space units, 1 expected")
    down[OUT + TOK[" "], space[0]] *= 2.0


def gemma4_weights(llama: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The llama weights as a Gemma4ForConditionalGeneration's (Hugging Face names)."""
    g3 = gemma3_weights(llama)
    root = math.sqrt(HIDDEN)
    lm = "model.language_model."
    emb = np.zeros((V4, HIDDEN), np.float32)
    emb[:V] = g3["model.embed_tokens.weight"]
    emb[V:, CONST] = KC / root
    for i in range(V):
        emb[i, OUT + i] += EPS
    final = np.zeros(HIDDEN, np.float32)
    final[OUT:OUT + V] = (g3["model.norm.weight"][OUT:OUT + V] + 1.0) / EPS
    w: dict[str, np.ndarray] = {
        lm + "embed_tokens.weight": emb,
        lm + "norm.weight": final,
        lm + "embed_tokens_per_layer.weight": np.zeros((V4, LAYERS * PLE), np.float32),
        lm + "per_layer_model_projection.weight": np.zeros((LAYERS * PLE, HIDDEN), np.float32),
        lm + "per_layer_projection_norm.weight": np.ones(PLE, np.float32),
    }
    zero_q = np.zeros((N_HEADS * HEAD_DIM, HIDDEN), np.float32)
    zero_kv = np.zeros((HEAD_DIM, HIDDEN), np.float32)
    ones_head = np.ones(HEAD_DIM, np.float32)
    for i in range(LAYERS):
        p, a = f"{lm}layers.{i}.", f"{lm}layers.{i}.self_attn."
        kv, qo = KV_FROM.get(i), QO_FROM.get(i)
        w[a + "k_proj.weight"], w[a + "v_proj.weight"] = zero_kv, zero_kv
        w[a + "k_norm.weight"] = ones_head
        if kv is not None:
            src = f"model.layers.{kv}."
            v = g3[src + "self_attn.v_proj.weight"].copy()
            v[V_CONST] *= C_V
            w[a + "k_proj.weight"] = g3[src + "self_attn.k_proj.weight"]
            w[a + "v_proj.weight"] = v
            w[a + "k_norm.weight"] = g3[src + "self_attn.k_norm.weight"] + 1.0
        if qo is None:
            w[a + "q_proj.weight"], w[a + "q_norm.weight"] = zero_q, ones_head
            w[a + "o_proj.weight"] = zero_q.T.copy()
            w[p + "mlp.gate_proj.weight"] = np.zeros((INTER, HIDDEN), np.float32)
            w[p + "mlp.up_proj.weight"] = np.zeros((INTER, HIDDEN), np.float32)
            w[p + "mlp.down_proj.weight"] = np.zeros((HIDDEN, INTER), np.float32)
        else:
            src = f"model.layers.{qo}."
            w[a + "q_proj.weight"] = g3[src + "self_attn.q_proj.weight"]
            # gemma-4 scores with scale 1, gemma-3 with 1/sqrt(head_dim).
            w[a + "q_norm.weight"] = (g3[src + "self_attn.q_norm.weight"] + 1.0) / math.sqrt(HEAD_DIM)
            o = g3[src + "self_attn.o_proj.weight"].copy()
            mlp = {x: g3[f"{src}mlp.{x}_proj.weight"].copy() for x in ("gate", "up", "down")}
            if i == 3:
                _without_bos(g3, o, mlp)
            w[a + "o_proj.weight"] = _rescaled_o(o)
            for x, weight in mlp.items():
                w[f"{p}mlp.{x}_proj.weight"] = weight
        # The layer's input is the residual its source layer of gemma-3 read (layers 1 and 2
        # write nothing), so each norm is that layer's.
        norms_of = f"model.layers.{kv if kv is not None else qo if qo is not None else 0}."
        for norm in _NORMS:
            w[p + norm + ".weight"] = g3[norms_of + norm + ".weight"] + 1.0
        w[p + "per_layer_input_gate.weight"] = np.zeros((PLE, HIDDEN), np.float32)
        w[p + "per_layer_projection.weight"] = np.zeros((HIDDEN, PLE), np.float32)
        w[p + "post_per_layer_input_norm.weight"] = np.zeros(HIDDEN, np.float32)
        w[p + "layer_scalar"] = np.ones(1, np.float32)
    rng = np.random.default_rng(0)   # the vision tower only has to load and run
    for name, shape in _vision_shapes(VISION_CONFIG, HIDDEN):
        w["model." + name] = (np.ones(shape) if len(shape) == 1
                              else rng.normal(0.0, 0.02, shape)).astype(np.float32)
    return {name: np.ascontiguousarray(x, np.float32) for name, x in w.items()}


def add_gemma4_tokens(out: Path) -> None:
    """The task tokenizer (already in ``out``) with gemma-4's specials after its vocabulary,
    and the processor's files."""
    from tokenizers import AddedToken, Tokenizer  # type: ignore[import-not-found, unused-ignore]

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in GEMMA_SPECIALS])
    if [tok.token_to_id(t) for t in GEMMA_SPECIALS] != list(range(V, V4)):
        raise RuntimeError("gemma-4's specials did not land after the task vocabulary")
    tok.save(str(out / "tokenizer.json"))
    config = json.loads((out / "tokenizer_config.json").read_text())
    config.update(pad_token="</s>", padding_side="left", extra_special_tokens=PROCESSOR_TOKENS)
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    write_processor_files(out)


def write_gemma4_config(out: Path, *, sliding_window: int = SLIDING_WINDOW) -> None:
    ids = {t: V + i for i, t in enumerate(GEMMA_SPECIALS)}
    rope = {"rope_type": "default", "rope_theta": ROPE_BASE}
    text = {
        "model_type": "gemma4_text", "vocab_size": V4, "vocab_size_per_layer_input": V4,
        "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": LAYERS,
        "num_attention_heads": N_HEADS, "num_key_value_heads": 1, "head_dim": HEAD_DIM,
        "global_head_dim": HEAD_DIM, "num_global_key_value_heads": None,
        "attention_k_eq_v": False, "num_kv_shared_layers": SHARED,
        "hidden_size_per_layer_input": PLE, "sliding_window": sliding_window,
        "layer_types": LAYER_TYPES, "max_position_embeddings": MAX_LEN,
        "rope_parameters": {"sliding_attention": dict(rope), "full_attention": dict(rope)},
        "final_logit_softcapping": None, "use_double_wide_mlp": False,
        "enable_moe_block": False, "hidden_activation": "gelu_pytorch_tanh",
        "attention_bias": False, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
        "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1,
    }
    cfg: dict[str, Any] = {
        "architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
        "text_config": text, "vision_config": dict(VISION_CONFIG),
        # mlx-vlm builds a full-size audio tower when the key is absent.
        "audio_config": None,
        "vocab_size": V4, "hidden_size": HIDDEN, "pad_token_id": 1, "eos_token_id": [1],
        "bos_token_id": 0, "image_token_id": ids["<image_soft_token>"],
        "audio_token_id": ids["<audio_soft_token>"], "boi_token_id": ids["<boi>"],
        "eoi_token_id": ids["<eoi>"], "boa_token_id": ids["<boa>"], "eoa_token_id": ids["<eoa>"],
        "vision_soft_tokens_per_image": VISION_CONFIG["default_output_length"],
        "tie_word_embeddings": True, "torch_dtype": "float32",
    }
    _write_json(out / "config.json", cfg)
    _write_json(out / "generation_config.json", {"bos_token_id": 0, "eos_token_id": 1,
                                                 "do_sample": False})
