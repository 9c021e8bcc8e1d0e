"""Writes a tiny random gemma3_text (or llama) model. Runs under an engine venv's python.

Standalone on purpose (numpy, safetensors and tokenizers only, no batchprobe
import): batchprobe itself stays free of those dependencies, and the mlx-lm
environment already has all three.  Usage: python this.py SEED gemma3|llama OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np  # type: ignore[import-not-found, unused-ignore]
from safetensors.numpy import save_file  # type: ignore[import-not-found, unused-ignore]
from tokenizers import Tokenizer, models, pre_tokenizers  # type: ignore[import-not-found, unused-ignore]

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
WORDS = [
    "the",
    "a",
    "an",
    "and",
    "or",
    "of",
    "to",
    "in",
    "on",
    "at",
    "for",
    "with",
    "is",
    "are",
    "was",
    "be",
    "it",
    "this",
    "that",
    "code",
    "access",
    "vault",
    "log",
    "line",
    "key",
    "value",
    "session",
    "needle",
    "answer",
    "user",
    "assistant",
    "system",
    "model",
    "request",
    "server",
    "error",
    "ok",
    "info",
    "debug",
    "warn",
    "time",
    "date",
    "id",
    "name",
    "number",
    "port",
    "host",
    "what",
    "which",
    "where",
    "who",
    "is",
    "my",
    "your",
    "our",
    "their",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
]
VOCAB_SIZE = 512
HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN = 64, 2, 2, 1, 32, 128
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }} {{ m['content'] }}"
    "<end_of_turn> {% endfor %}{% if add_generation_prompt %}<start_of_turn>model {% endif %}"
)


def vocabulary() -> dict[str, int]:
    """Specials, characters, common words, then filler tokens up to VOCAB_SIZE."""
    tokens = list(SPECIALS)
    chars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,:;=?!-_'\"()[]/#"
    for tok in [*chars, *WORDS]:
        if tok not in tokens:
            tokens.append(tok)
    tokens += [f"w{i}" for i in range(VOCAB_SIZE - len(tokens))]
    return {tok: i for i, tok in enumerate(tokens)}


def write_tokenizer(out: Path) -> None:
    tok = Tokenizer(models.WordLevel(vocab=vocabulary(), unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(SPECIALS)
    tok.save(str(out / "tokenizer.json"))
    specials = {
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": 8192,
        "add_bos_token": False,
        **specials,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps(specials, indent=2))


def model_config(family: str) -> dict[str, object]:
    shared: dict[str, object] = {
        "hidden_size": HIDDEN,
        "intermediate_size": FFN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": VOCAB_SIZE,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
    }
    if family == "llama":
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            **shared,
            "rope_theta": 10000.0,
            "hidden_act": "silu",
        }
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        **shared,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "query_pre_attn_scalar": HEAD_DIM,
        "sliding_window": 8,
        "sliding_window_pattern": 2,
        "layer_types": ["sliding_attention", "full_attention"],
        "hidden_activation": "gelu_pytorch_tanh",
        "rope_scaling": None,
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
    }


def weights(seed: int, family: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def rand(*shape: int, std: float = 0.08) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    out = {
        "model.embed_tokens.weight": rand(VOCAB_SIZE, HIDDEN, std=1.0),
        "model.norm.weight": rand(HIDDEN, std=0.1) + (1.0 if family == "llama" else 0.0),
    }
    head = rand(VOCAB_SIZE, HIDDEN, std=0.5)
    # Special tokens get zero logits, so greedy decoding never stops early on <eos>.
    head[: len(SPECIALS)] = 0.0
    out["lm_head.weight"] = head
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        # The llama's attention is sharp (large query and key weights): its answer depends on
        # which tokens the prompt holds, so a prompt answered from another's KV shows.
        qk = 0.6 if family == "llama" else 0.08
        out[p + "self_attn.q_proj.weight"] = rand(HEADS * HEAD_DIM, HIDDEN, std=qk)
        out[p + "self_attn.k_proj.weight"] = rand(KV_HEADS * HEAD_DIM, HIDDEN, std=qk)
        out[p + "self_attn.v_proj.weight"] = rand(KV_HEADS * HEAD_DIM, HIDDEN)
        out[p + "self_attn.o_proj.weight"] = rand(HIDDEN, HEADS * HEAD_DIM)
        if family != "llama":
            out[p + "self_attn.q_norm.weight"] = rand(HEAD_DIM, std=0.1)
            out[p + "self_attn.k_norm.weight"] = rand(HEAD_DIM, std=0.1)
        out[p + "mlp.gate_proj.weight"] = rand(FFN, HIDDEN)
        out[p + "mlp.up_proj.weight"] = rand(FFN, HIDDEN)
        out[p + "mlp.down_proj.weight"] = rand(HIDDEN, FFN)
        if family == "llama":
            # Llama scales by the norm weight itself (gemma by 1 + weight).
            for norm in ("input_layernorm", "post_attention_layernorm"):
                out[p + norm + ".weight"] = 1.0 + rand(HIDDEN, std=0.1)
            continue
        for norm in (
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ):
            out[p + norm + ".weight"] = rand(HIDDEN, std=0.1)
    return out


def main(out: Path, seed: int, family: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights(seed, family), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(model_config(family), indent=2))
    generation = {"bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0, "do_sample": False}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2))
    write_tokenizer(out)


if __name__ == "__main__":
    main(Path(sys.argv[3]), int(sys.argv[1]), sys.argv[2])  # SEED FAMILY OUT
