"""A tiny random Gemma-4 model (text + a tiny vision tower), built offline.

It reproduces the shape of the bug class batchprobe was made for: 4 text layers alternating
sliding-window (window 8) and full attention, the last 2 sharing the KV of earlier layers, and a
vision tower so that mlx-vlm loads it as a full gemma4 model and vllm-mlx takes its multimodal
path. Random weights: meaningless recall, but deterministic greedy text, which is what
equivalence and crash checks need.

It is written with the standard library only (the safetensors layout and the ``tokenizers``
JSON format are simple and stable), so ``build`` runs in batchprobe's own lean environment, needs
no engine venv and no network, and gives the same bytes for the same seed on every machine. The
tests load the result with the ``tokenizers`` library, mlx-vlm and vllm-mlx.

vllm-mlx picks its multimodal engine from the model *path*: keep "gemma4" in the directory
name (e.g. ``.../tiny-gemma4``) when serving it with vllm-mlx.
"""

from __future__ import annotations

import json
import math
import random
import struct
import sys
from array import array
from pathlib import Path
from typing import Any

__all__ = ["PROCESSOR_TOKENS", "TEXT_CONFIG", "VISION_CONFIG", "build", "write_processor_files"]

_SPECIALS = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<boi>",
    "<eoi>",
    "<image_soft_token>",
    "<audio_soft_token>",
    "<boa>",
    "<eoa>",
    "<start_of_turn>",
    "<end_of_turn>",
]
_PUNCT = list(".,:;!?=-_'\"()[]{}/#@%&*+<>|$")
_WORD_LINES = (
    "the a an and or of to in on at by for with from is are was were be been it this that",
    "these those there here what which who when where why how not no yes all any some each",
    "one two three four five six seven eight nine ten code key value secret access number log",
    "line system server request session user model token error warning info debug time date",
    "day night data file record entry message status ok done start stop run test item list",
    "name id word text note story city river house tree stone light water fire wind please",
    "answer question remember find say tell write read give only",
)
_WORDS = [word for line in _WORD_LINES for word in line.split()]

TEXT_CONFIG: dict[str, Any] = {
    "model_type": "gemma4_text",
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "head_dim": 32,
    "global_head_dim": 32,
    "num_key_value_heads": 1,
    "num_kv_shared_layers": 2,
    "hidden_size_per_layer_input": 16,
    "sliding_window": 8,
    "layer_types": ["sliding_attention", "full_attention"] * 2,
    "max_position_embeddings": 4096,
    "final_logit_softcapping": 30.0,
    "use_double_wide_mlp": True,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
VISION_CONFIG: dict[str, Any] = {
    "model_type": "gemma4_vision",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "global_head_dim": 16,
    "patch_size": 16,
    "position_embedding_size": 64,
    "pooling_kernel_size": 2,
    "default_output_length": 4,
    "rms_norm_eps": 1e-6,
}
# Gemma4Processor reads these names off the tokenizer to place image soft tokens.
PROCESSOR_TOKENS = {
    "image_token": "<image_soft_token>",
    "boi_token": "<boi>",
    "eoi_token": "<eoi>",
    "audio_token": "<audio_soft_token>",
    "boa_token": "<boa>",
    "eoa_token": "<eoa>",
}
_EMBED_STD = 0.25
_POST_NORM_SCALE = 3.0
# A chat template of our own (Gemma-like turns); content may be a string or a list of parts.
_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }} "
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }} {% endif %}{% endfor %}{% endif %}"
    "<end_of_turn>{% endfor %}{% if add_generation_prompt %}<start_of_turn>model {% endif %}"
)


def build(path: Path, seed: int = 0) -> Path:
    """Write the tiny gemma-4 model into ``path`` (created) and return ``path``.

    Same seed, same bytes. Files: config.json, model.safetensors, tokenizer.json,
    tokenizer_config.json, special_tokens_map.json, processor_config.json,
    preprocessor_config.json, generation_config.json, chat_template.jinja.
    """
    path.mkdir(parents=True, exist_ok=True)
    vocab = _vocab()
    ids = {tok: i for i, tok in enumerate(vocab)}
    _write_json(path / "config.json", _model_config(len(vocab), ids))
    _write_safetensors(path / "model.safetensors", _random_tensors(len(vocab), seed))
    _write_json(path / "tokenizer.json", _tokenizer_json(vocab))
    _write_tokenizer_side_files(path)
    eos = [ids["<eos>"], ids["<end_of_turn>"]]
    _write_json(path / "generation_config.json", {"do_sample": False, "eos_token_id": eos})
    return path


def _vocab() -> list[str]:
    singles = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    singles += [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    singles += [str(d) for d in range(10)]
    seen: set[str] = set()
    vocab: list[str] = []
    for tok in _SPECIALS + singles + _PUNCT + _WORDS:
        if tok not in seen:
            seen.add(tok)
            vocab.append(tok)
    return vocab


def _model_config(vocab_size: int, ids: dict[str, int]) -> dict[str, Any]:
    text = dict(TEXT_CONFIG, vocab_size=vocab_size, vocab_size_per_layer_input=vocab_size)
    return {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": text,
        "vision_config": dict(VISION_CONFIG),
        "audio_config": None,  # mlx-vlm builds a full-size audio tower when the key is absent
        "vocab_size": vocab_size,
        "hidden_size": TEXT_CONFIG["hidden_size"],
        "pad_token_id": ids["<pad>"],
        "eos_token_id": [ids["<eos>"], ids["<end_of_turn>"]],
        "bos_token_id": ids["<bos>"],
        "image_token_id": ids["<image_soft_token>"],
        "audio_token_id": ids["<audio_soft_token>"],
        "boi_token_id": ids["<boi>"],
        "eoi_token_id": ids["<eoi>"],
        "boa_token_id": ids["<boa>"],
        "eoa_token_id": ids["<eoa>"],
        "vision_soft_tokens_per_image": VISION_CONFIG["default_output_length"],
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }


def _tensor_shapes(vocab_size: int) -> list[tuple[str, tuple[int, ...]]]:
    """Names and shapes as mlx-vlm's gemma4 Model holds them (checked by a strict load)."""
    t, v = TEXT_CONFIG, VISION_CONFIG
    hid, ple, n = t["hidden_size"], t["hidden_size_per_layer_input"], t["num_hidden_layers"]
    first_shared = n - t["num_kv_shared_layers"]  # these layers get a double-wide MLP
    q_dim, kv_dim = (
        t["num_attention_heads"] * t["head_dim"],
        t["num_key_value_heads"] * t["head_dim"],
    )
    lm = "language_model.model"
    shapes: list[tuple[str, tuple[int, ...]]] = [(f"{lm}.embed_tokens.weight", (vocab_size, hid))]
    for i in range(n):
        p = f"{lm}.layers.{i}"
        inter = t["intermediate_size"] * (2 if i >= first_shared else 1)
        shapes += [
            (f"{p}.self_attn.q_proj.weight", (q_dim, hid)),
            (f"{p}.self_attn.o_proj.weight", (hid, q_dim)),
            (f"{p}.self_attn.q_norm.weight", (t["head_dim"],)),
            # Shared-KV layers never use their own K/V projections; real checkpoints
            # still carry them, mlx-vlm 0.5.0 requires them and later versions drop them.
            (f"{p}.self_attn.k_proj.weight", (kv_dim, hid)),
            (f"{p}.self_attn.v_proj.weight", (kv_dim, hid)),
            (f"{p}.self_attn.k_norm.weight", (t["head_dim"],)),
        ]
        shapes += [
            (f"{p}.mlp.gate_proj.weight", (inter, hid)),
            (f"{p}.mlp.up_proj.weight", (inter, hid)),
            (f"{p}.mlp.down_proj.weight", (hid, inter)),
        ]
        shapes += [
            (f"{p}.{norm}.weight", (hid,))
            for norm in (
                "input_layernorm",
                "post_attention_layernorm",
                "pre_feedforward_layernorm",
                "post_feedforward_layernorm",
                "post_per_layer_input_norm",
            )
        ]
        shapes += [
            (f"{p}.per_layer_input_gate.weight", (ple, hid)),
            (f"{p}.per_layer_projection.weight", (hid, ple)),
            (f"{p}.layer_scalar", (1,)),
        ]
    shapes += [
        (f"{lm}.norm.weight", (hid,)),
        (f"{lm}.embed_tokens_per_layer.weight", (vocab_size, n * ple)),
        (f"{lm}.per_layer_model_projection.weight", (n * ple, hid)),
        (f"{lm}.per_layer_projection_norm.weight", (ple,)),
    ]
    return shapes + _vision_shapes(v, hid)


def _vision_shapes(v: dict[str, Any], text_hidden: int) -> list[tuple[str, tuple[int, ...]]]:
    vh, vi, vt = v["hidden_size"], v["intermediate_size"], "vision_tower"
    shapes: list[tuple[str, tuple[int, ...]]] = [
        (f"{vt}.patch_embedder.input_proj.weight", (vh, 3 * v["patch_size"] ** 2)),
        (f"{vt}.patch_embedder.position_embedding_table", (2, v["position_embedding_size"], vh)),
    ]
    for i in range(v["num_hidden_layers"]):
        p = f"{vt}.encoder.layers.{i}"
        shapes += [(f"{p}.self_attn.{n}_proj.linear.weight", (vh, vh)) for n in "qkvo"]
        shapes += [(f"{p}.self_attn.{n}_norm.weight", (v["head_dim"],)) for n in "qk"]
        shapes += [
            (f"{p}.mlp.gate_proj.linear.weight", (vi, vh)),
            (f"{p}.mlp.up_proj.linear.weight", (vi, vh)),
            (f"{p}.mlp.down_proj.linear.weight", (vh, vi)),
        ]
        shapes += [
            (f"{p}.{norm}.weight", (vh,))
            for norm in (
                "input_layernorm",
                "post_attention_layernorm",
                "pre_feedforward_layernorm",
                "post_feedforward_layernorm",
            )
        ]
    return shapes + [("embed_vision.embedding_projection.weight", (text_hidden, vh))]


def _random_tensors(vocab_size: int, seed: int) -> dict[str, tuple[tuple[int, ...], array[float]]]:
    rng = random.Random(seed)
    tensors: dict[str, tuple[tuple[int, ...], array[float]]] = {}
    for name, shape in _tensor_shapes(vocab_size):
        count = math.prod(shape)
        if name.endswith("layer_scalar"):
            values = [1.0]
        elif len(shape) == 1:
            values = [rng.gauss(_norm_scale(name), 0.1) for _ in range(count)]
        else:
            std = _EMBED_STD if "embed_tokens" in name else 1.0 / math.sqrt(shape[-1])
            values = [rng.gauss(0.0, std) for _ in range(count)]
        tensors[name] = (shape, array("f", values))
    return tensors


def _norm_scale(name: str) -> float:
    # Small token embeddings and strong post-norms let the layers, not the residual copy of the
    # input token, decide the next token: greedy text then depends on attention and positions
    # (so a RoPE or cache bug changes it) and logits are spread enough to avoid near-ties.
    if name.endswith(
        (
            "post_attention_layernorm.weight",
            "post_feedforward_layernorm.weight",
            "model.norm.weight",
        )
    ):
        return _POST_NORM_SCALE
    return 1.0


def _write_safetensors(
    path: Path, tensors: dict[str, tuple[tuple[int, ...], array[float]]]
) -> None:
    header: dict[str, Any] = {"__metadata__": {"format": "mlx"}}
    offset = 0
    for name, (shape, data) in tensors.items():
        size = len(data) * data.itemsize
        header[name] = {
            "dtype": "F32",
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the format wants the data 8-byte aligned
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for _shape, data in tensors.values():
            if sys.byteorder == "big":  # safetensors is little-endian
                data = array("f", data)
                data.byteswap()
            fh.write(data.tobytes())


def _tokenizer_json(vocab: list[str]) -> dict[str, Any]:
    """A ``tokenizers`` WordLevel tokenizer: whitespace/punctuation split, unknown -> <unk>."""
    added = [
        {
            "id": i,
            "content": tok,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, tok in enumerate(vocab)
        if tok in _SPECIALS
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {
            "type": "WordLevel",
            "vocab": {t: i for i, t in enumerate(vocab)},
            "unk_token": "<unk>",
        },
    }


def _write_tokenizer_side_files(path: Path) -> None:
    specials = {
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
    }
    _write_json(
        path / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            **specials,
            "extra_special_tokens": PROCESSOR_TOKENS,
            "model_max_length": TEXT_CONFIG["max_position_embeddings"],
            "padding_side": "left",
            "chat_template": _CHAT_TEMPLATE,
        },
    )
    _write_json(path / "special_tokens_map.json", specials)
    (path / "chat_template.jinja").write_text(_CHAT_TEMPLATE, encoding="utf-8")
    write_processor_files(path)


def write_processor_files(path: Path) -> None:
    """processor_config.json and preprocessor_config.json for the tiny vision tower (also
    the task model's, ``_tiny_task_gemma4``)."""
    _write_json(
        path / "processor_config.json",
        {
            "processor_class": "Gemma4Processor",
            "image_seq_length": VISION_CONFIG["default_output_length"],
        },
    )
    _write_json(
        path / "preprocessor_config.json",
        {
            "image_processor_type": "Gemma4ImageProcessor",
            "processor_class": "Gemma4Processor",
            "patch_size": VISION_CONFIG["patch_size"],
            "pooling_kernel_size": VISION_CONFIG["pooling_kernel_size"],
            "max_soft_tokens": VISION_CONFIG["default_output_length"],
            "do_normalize": False,
            "do_rescale": True,
            "do_resize": True,
        },
    )


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
