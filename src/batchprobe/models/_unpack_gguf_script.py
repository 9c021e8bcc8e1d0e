"""Unpacks a Gemma 3 GGUF into a Hugging Face checkpoint. Runs under the model-tools env's python.

Standalone on purpose (gguf, numpy, safetensors and tokenizers only, no batchprobe import), like
``_tiny_gemma3_script.py``. Usage: python this.py GGUF OUT_DIR. Exit 3: the GGUF is not a readable
Gemma 3 file (the message says why); exit 4: no space left.

What llama.cpp's conversion did, and what is undone here:
- tensor names (``blk.N.attn_q`` ...) are mapped back to ``model.layers.N.self_attn.q_proj``;
- every tensor is dequantised (Q4_K, Q5_0, Q6_K, Q8_0 ...) to float32 in the (out, in) layout;
- every ``*norm.weight`` was stored as ``1 + w`` (Gemma's RMSNorm scales by ``1 + w``): 1 is
  subtracted again;
- no ``output.weight``: the output layer is the embedding (``tie_word_embeddings``);
- rope and sliding window: llama.cpp hard-codes Gemma 3's local rope base (10,000) and its
  5-local-1-global layer pattern, so they are written back into the config;
- the vocabulary (a SentencePiece model scored per token) becomes a BPE ``tokenizer.json``
  whose merges are ranked by the merged token's score, as llama.cpp's SPM tokenizer merges;
  user-defined tokens (newline and space runs, HTML tags) are added tokens matched before the
  model, as llama.cpp partitions them out first;
- the base model has no chat template; Gemma's turn format is written.
"""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

import gguf  # type: ignore[import-not-found, unused-ignore]
import numpy as np  # type: ignore[import-not-found, unused-ignore]
from safetensors import SafetensorError  # type: ignore[import-not-found, unused-ignore]
from safetensors.numpy import save_file  # type: ignore[import-not-found, unused-ignore]

NORMAL, CONTROL, USER_DEFINED, BYTE = 1, 3, 4, 6
LOCAL_ROPE_BASE = 10000.0
SLIDING_PATTERN = 6
LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n{{ message['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


class BadGGUF(Exception):
    """The file is not a readable Gemma 3 GGUF."""


def field(reader: gguf.GGUFReader, key: str) -> object:
    found = reader.fields.get(key)
    if found is None:
        raise BadGGUF(f"metadata {key!r} is missing")
    return found.contents()


def hf_name(name: str) -> str:
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in LAYER_NAMES and parts[3] == "weight":
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}.weight"
    raise BadGGUF(f"tensor {name!r} has no Gemma 3 counterpart")


def weights(reader: gguf.GGUFReader) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for tensor in reader.tensors:
        name = hf_name(tensor.name)
        data = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        expected = tuple(int(n) for n in reversed(tensor.shape.tolist()))
        if data.shape != expected:
            raise BadGGUF(f"tensor {tensor.name!r} dequantised to {data.shape}, not {expected}")
        out[name] = data - 1.0 if name.endswith("norm.weight") else data
    if "model.embed_tokens.weight" not in out:
        raise BadGGUF("no token_embd.weight tensor")
    return out


def model_config(reader: gguf.GGUFReader) -> dict[str, object]:
    if field(reader, "general.architecture") != "gemma3":
        raise BadGGUF(f"architecture {field(reader, 'general.architecture')!r} is not gemma3")
    vocab_size = len(reader.fields["tokenizer.ggml.tokens"].data)
    arch = "gemma3."
    layers = int(field(reader, arch + "block_count"))  # type: ignore[call-overload]
    pattern = ["sliding_attention"] * (SLIDING_PATTERN - 1) + ["full_attention"]
    head_dim = int(field(reader, arch + "attention.key_length"))  # type: ignore[call-overload]
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": field(reader, arch + "embedding_length"),
        "intermediate_size": field(reader, arch + "feed_forward_length"),
        "num_hidden_layers": layers,
        "num_attention_heads": field(reader, arch + "attention.head_count"),
        "num_key_value_heads": field(reader, arch + "attention.head_count_kv"),
        "head_dim": head_dim,
        "query_pre_attn_scalar": head_dim,
        "rms_norm_eps": field(reader, arch + "attention.layer_norm_rms_epsilon"),
        "vocab_size": vocab_size,
        "max_position_embeddings": field(reader, arch + "context_length"),
        "rope_theta": field(reader, arch + "rope.freq_base"),
        "rope_local_base_freq": LOCAL_ROPE_BASE,
        "rope_scaling": None,
        "sliding_window": field(reader, arch + "attention.sliding_window"),
        "sliding_window_pattern": SLIDING_PATTERN,
        "_sliding_window_pattern": SLIDING_PATTERN,
        "layer_types": [pattern[i % SLIDING_PATTERN] for i in range(layers)],
        "hidden_activation": "gelu_pytorch_tanh",
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
        "attention_bias": False,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "bos_token_id": field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": field(reader, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": field(reader, "tokenizer.ggml.padding_token_id"),
    }


def vocabulary(reader: gguf.GGUFReader) -> tuple[list[str], list[float], list[int]]:
    if field(reader, "tokenizer.ggml.model") != "llama":
        raise BadGGUF("the tokenizer is not a SentencePiece ('llama') vocabulary")
    tokens = [str(t) for t in field(reader, "tokenizer.ggml.tokens")]  # type: ignore[attr-defined]
    scores = [float(s) for s in field(reader, "tokenizer.ggml.scores")]  # type: ignore[attr-defined]
    types = [int(t) for t in field(reader, "tokenizer.ggml.token_type")]  # type: ignore[attr-defined]
    if not len(tokens) == len(scores) == len(types):
        raise BadGGUF("tokens, scores and token types differ in length")
    return tokens, scores, types


def merges(tokens: list[str], scores: list[float], types: list[int]) -> list[list[str]]:
    """Every split of a token into two tokens, best merged score first (llama.cpp's SPM order)."""
    ids = {tok: i for i, tok in enumerate(tokens) if types[i] != BYTE}
    found: list[tuple[float, int, int, int]] = []
    for merged, i in ids.items():
        for cut in range(1, len(merged)):
            left, right = ids.get(merged[:cut]), ids.get(merged[cut:])
            if left is not None and right is not None:
                found.append((-scores[i], i, left, right))
    found.sort()
    return [[tokens[left], tokens[right]] for _, _, left, right in found]


def tokenizer_json(reader: gguf.GGUFReader) -> tuple[dict[str, object], list[str]]:
    tokens, scores, types = vocabulary(reader)
    bos = tokens[int(field(reader, "tokenizer.ggml.bos_token_id"))]  # type: ignore[call-overload]
    added = [
        {"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": types[i] == CONTROL}
        for i, tok in enumerate(tokens)
        if types[i] in (CONTROL, USER_DEFINED)
    ]
    unk = int(field(reader, "tokenizer.ggml.unknown_token_id"))  # type: ignore[call-overload]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [tokens.index(bos)], "tokens": [bos]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ]},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": tokens[unk],
            "continuing_subword_prefix": None, "end_of_word_suffix": None,
            "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": {tok: i for i, tok in enumerate(tokens)},
            "merges": merges(tokens, scores, types),
        },
    }, tokens


def write_tokenizer(reader: gguf.GGUFReader, out: Path) -> int:
    spec, tokens = tokenizer_json(reader)
    (out / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False))
    special = {
        key: tokens[int(field(reader, f"tokenizer.ggml.{key}_token_id"))]  # type: ignore[call-overload]
        for key in ("bos", "eos", "unknown", "padding")
    }
    specials = {"bos_token": special["bos"], "eos_token": special["eos"],
                "unk_token": special["unknown"], "pad_token": special["padding"]}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": 32768,
        "add_bos_token": True,
        "add_eos_token": False,
        **specials,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps(specials, indent=2))
    return tokens.index("<end_of_turn>") if "<end_of_turn>" in tokens else -1


def main(source: Path, out: Path) -> None:
    try:
        reader = gguf.GGUFReader(str(source))
        config = model_config(reader)
        tensors = weights(reader)
    except (ValueError, KeyError, IndexError, TypeError, OSError, BadGGUF) as exc:
        sys.stderr.write(f"not a readable Gemma 3 GGUF ({source}): {type(exc).__name__}: {exc}\n")
        raise SystemExit(3) from exc
    out.mkdir(parents=True, exist_ok=True)
    try:
        end_of_turn = write_tokenizer(reader, out)
        (out / "config.json").write_text(json.dumps(config, indent=2))
        stops = [config["eos_token_id"]] + ([end_of_turn] if end_of_turn >= 0 else [])
        generation = {"bos_token_id": config["bos_token_id"], "eos_token_id": stops,
                      "pad_token_id": config["pad_token_id"], "do_sample": False}
        (out / "generation_config.json").write_text(json.dumps(generation, indent=2))
        save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    except (OSError, SafetensorError) as exc:
        # safetensors reports a full disk as its own error, naming the OS error.
        if getattr(exc, "errno", None) == errno.ENOSPC or "os error 28" in str(exc):
            sys.stderr.write(f"no space left writing {out}: {exc}\n")
            raise SystemExit(4) from exc
        raise


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
