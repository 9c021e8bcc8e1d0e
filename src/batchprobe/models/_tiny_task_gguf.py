"""The constructed llama as an F32 GGUF, written with gguf-py (run under the model-tools python).

llama.cpp's converter is not needed: the tensors map one to one, q and k permuted into
llama.cpp's rotary layout, and the vocabulary goes in as a byte-level BPE with no merges
(every token a character, a special or one of the probe's marker words).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gguf  # type: ignore[import-not-found, unused-ignore]
import numpy as np
from safetensors.numpy import load_file  # type: ignore[import-not-found, unused-ignore]

_NAMES = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def _byte_level(text: str) -> str:
    """GPT-2's bytes-to-unicode for ASCII: printable 33..126 stay, the rest move up."""
    out = []
    for b in text.encode():
        out.append(chr(b) if 33 <= b <= 126 else chr(256 + b) if b < 33 else chr(b + 162))
    return "".join(out)


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    split = w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
    permuted: np.ndarray = split.swapaxes(1, 2).reshape(w.shape)
    return permuted


def _vocab(tj: dict[str, Any]) -> tuple[list[str], list[Any]]:
    vocab = dict(tj["model"]["vocab"])
    for t in tj["added_tokens"]:
        vocab[t["content"]] = t["id"]
    specials = {t["content"] for t in tj["added_tokens"] if t["special"]}
    added = {t["content"] for t in tj["added_tokens"] if not t["special"]}
    tokens: list[str] = []
    types: list[Any] = []
    for text, i in sorted(vocab.items(), key=lambda kv: kv[1]):
        if i != len(tokens):
            raise RuntimeError(f"token ids are not contiguous at {i}")
        if text in specials:
            tokens.append(text)
            types.append(gguf.TokenType.CONTROL)
        elif text in added:
            tokens.append(text)
            types.append(gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(_byte_level(text))
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def _padded(w: dict[str, np.ndarray], layers: int, inter: int) -> dict[str, np.ndarray]:
    """The MLP widened to ``inter`` units with zero weights: silu(0) * 0 adds nothing, so the
    answers are the same, but every token pays for the units (llama.cpp computes them)."""
    out = dict(w)
    for layer in range(layers):
        for name, axis in (("gate_proj", 0), ("up_proj", 0), ("down_proj", 1)):
            key = f"model.layers.{layer}.mlp.{name}.weight"
            t = w[key]
            pad = [(0, 0), (0, 0)]
            pad[axis] = (0, inter - t.shape[axis])
            out[key] = np.pad(t, pad)
    return out


def write_gguf(model_dir: Path, out: Path, inter: int | None = None) -> None:
    cfg = json.loads((model_dir / "config.json").read_text())
    tj = json.loads((model_dir / "tokenizer.json").read_text())
    template = json.loads((model_dir / "tokenizer_config.json").read_text())["chat_template"]
    w = load_file(str(model_dir / "model.safetensors"))
    if inter is not None:
        w = _padded(w, cfg["num_hidden_layers"], inter)
        cfg = {**cfg, "intermediate_size": inter}
    tokens, types = _vocab(tj)
    wr = gguf.GGUFWriter(str(out), "llama")
    wr.add_name("batchprobe-tiny-llama-task")
    wr.add_context_length(cfg["max_position_embeddings"])
    wr.add_embedding_length(cfg["hidden_size"])
    wr.add_block_count(cfg["num_hidden_layers"])
    wr.add_feed_forward_length(cfg["intermediate_size"])
    wr.add_head_count(cfg["num_attention_heads"])
    wr.add_head_count_kv(cfg["num_key_value_heads"])
    wr.add_key_length(cfg["head_dim"])
    wr.add_value_length(cfg["head_dim"])
    wr.add_rope_dimension_count(cfg["head_dim"])
    wr.add_rope_freq_base(cfg["rope_theta"])
    wr.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    wr.add_vocab_size(len(tokens))
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("default")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_merges(["~ ~"])  # llama.cpp wants a merges array; "~~" is no token: a no-op
    wr.add_bos_token_id(cfg["bos_token_id"])
    wr.add_eos_token_id(cfg["eos_token_id"])
    wr.add_unk_token_id(2)
    wr.add_add_bos_token(True)
    wr.add_add_eos_token(False)
    wr.add_chat_template(template)
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    wr.add_tensor("token_embd.weight", w["model.embed_tokens.weight"])
    for layer in range(cfg["num_hidden_layers"]):
        for hf, gg in _NAMES.items():
            t = w[f"model.layers.{layer}.{hf}.weight"]
            if hf == "self_attn.q_proj":
                t = _permute(t, nh)
            elif hf == "self_attn.k_proj":
                t = _permute(t, nkv)
            wr.add_tensor(f"blk.{layer}.{gg}.weight", np.ascontiguousarray(t, dtype=np.float32))
    wr.add_tensor("output_norm.weight", w["model.norm.weight"])
    wr.add_tensor("output.weight", w["lm_head.weight"])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
