"""Construct (not train) a tiny LlamaForCausalLM that does batchprobe's tasks: needle recall
(KEY=<digits>) and counting, over the completions and the chat prompts. Run under the
model-tools python: ``python _tiny_task_build.py FAMILY OUT_DIR`` writes the Hugging Face
checkpoint (safetensors, tokenizer.json, chat template) and, for llama, ``model.gguf`` beside
it (its MLP widened with zero units: see ``GGUF_INTER``). FAMILY gemma3 carries the same
weights over to gemma-3's layout (``_tiny_task_gemma3``), gemma4 on to gemma-4's
(``_tiny_task_gemma4``).

Deterministic: no seed, no training; the only numerics are the kernels' linear programs.
The vocabulary is the printable ASCII characters, a few specials and the probe's marker
words, so a code is one token per digit and the tasks are exact copies:

Layer 0: 12 offset heads (head h attends distance h+1 and copies the token's feature block
F_0 into F_{h+1}); head 12 ("asked key") attends the most recent question token
(`ACCESS_CODE?` .. / `Count upwards from `) and writes its kind into AK. MLP 0 turns
"<|assistant|> at distance o" + AK into a virtual key at distance o.
Layer 1: head 0 recall (query: key kind at distance o; key: key kind at distance o+1; copies
the token: digits, newline, comma), head 1 count (finds the same digit slot in the previous
number, copies it and its next digits), MLP 1 the +1/carry logic and the ',' -> ' ' bigram.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
from _tiny_task_gguf import write_gguf  # type: ignore[import-not-found, unused-ignore]
from _tiny_task_kernels import (  # type: ignore[import-not-found, unused-ignore]
    evaluate,
    long_recency,
    offset_kernel,
    recency_kernel,
    thetas,
)

# ---------------------------------------------------------------- tokenizer
SPECIALS = ["<s>", "</s>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>"]
CHARS = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
KEYS = ["ACCESS_CODE=", "DOOR_CODE=", "VAULT_CODE=", "GATE_CODE="]
ASKS = ["ACCESS_CODE?", "DOOR_CODE?", "VAULT_CODE?", "GATE_CODE?", "Count upwards from "]
# The words the params shape's bias rows force (batchprobe.send.discover.BIAS_WORDS), one
# token each so a logit bias can force one; nothing else ever writes them.
BIAS_WORDS = [" apple", " river", " garden", " silver", " yellow", " window", " orange", " music"]
VOCAB = SPECIALS + CHARS + KEYS + ASKS + BIAS_WORDS
TOK = {t: i for i, t in enumerate(VOCAB)}
V = len(VOCAB)
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

# ---------------------------------------------------------------- geometry
HEAD_DIM = 64
N_OFF = 12                  # offset heads (distances 1..12)
N_HEADS = N_OFF + 1         # + the asked-key head
ROPE_BASE, N_ROT, STATIC0 = 2.8e12, 15, 16  # pairs 0..14 rotate; 16..31 static (<= 0.005 rad @ 8192)
MAX_LEN = 8192
KC = 1000.0
NKIND = 5                   # key kinds: 4 needle keys + "count" (kind 4)
KEY_CODE = [(1, 1, 1), (1, -1, -1), (-1, 1, -1), (-1, -1, 1), (1, 1, -1)]  # same 3, other <= 1
N_REC = 8                   # recall query distances 0..7 (7 digits, then the newline)
N_CNT = 7                   # count: nearest space at distance 0..6 (numbers up to 6 digits)

FEAT = (["bos"] + [f"k{i}" for i in range(NKIND)] + ["space", "comma", "newline"]
        + [f"d{i}" for i in range(10)] + ["marker", "ask"] + [f"a{i}" for i in range(NKIND)])
NF = len(FEAT)
FI = {f: i for i, f in enumerate(FEAT)}

CONST = 0
F_BASE = 1
SCR = F_BASE + (N_OFF + 1) * NF
NSCR = 16
AK = SCR + NSCR
NEAR = AK + 5                # NEAR+o: the nearest space/marker is at distance o (digits between)
OUT = NEAR + N_CNT
HIDDEN = OUT + V
_m = 8 * N_HEADS // math.gcd(8, N_HEADS)
HIDDEN += (-HIDDEN) % _m
INTER = 64
# model.gguf's MLP is widened with zero units to this many (the answers are the same):
# llama.cpp then decodes a token in ~3 ms here, as a small real model does, instead of 0.16
# ms, at which a whole reply leaves in one write and nothing can join or drop a stream.
GGUF_INTER = 8192

OFFSET_GAP = 25.0
S_A = 60.0                   # per unit of key-code dot (same kind = 3 units... scaled below)
G_A = 60.0
A_C = 15.0
K_SILU = 20.0
DEFAULT_LOGIT = 2.0             # deterministic default (no ties among zero logits)


def fdim(o: int, name: str) -> int:
    return F_BASE + o * NF + FI[name]


def features(tok: str) -> dict[str, float]:
    f: dict[str, float] = {}
    if tok == "<s>":
        f["bos"] = 1
    elif tok in KEYS:
        f[f"k{KEYS.index(tok)}"] = 1
    elif tok in ASKS:
        kind = ASKS.index(tok)
        f["ask"] = 1
        f[f"a{kind}"] = 1
        if kind == 4:            # "Count upwards from " is also a key: the start follows it
            f["k4"] = 1
    elif tok == "<|assistant|>":
        f["marker"] = 1
        f["space"] = 1           # the answer's first number starts after it (count head)
    elif tok == " ":
        f["space"] = 1
    elif tok == ",":
        f["comma"] = 1
    elif tok == "\n":
        f["newline"] = 1
    elif len(tok) == 1 and tok.isdigit():
        f[f"d{tok}"] = 1
    return f


def _attention(w: dict[str, np.ndarray], layer: int, q: np.ndarray, k: np.ndarray,
               v: np.ndarray, o: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Store a layer's attention; return its MLP's (gate, up, down), zero, to be filled."""
    p = f"model.layers.{layer}.self_attn."
    w[p + "q_proj.weight"], w[p + "k_proj.weight"] = q, k
    w[p + "v_proj.weight"], w[p + "o_proj.weight"] = v, o
    return (np.zeros((INTER, HIDDEN), np.float32), np.zeros((INTER, HIDDEN), np.float32),
            np.zeros((HIDDEN, INTER), np.float32))


def _mlp(w: dict[str, np.ndarray], layer: int, gate: np.ndarray, up: np.ndarray,
         down: np.ndarray) -> None:
    p = f"model.layers.{layer}.mlp."
    w[p + "gate_proj.weight"], w[p + "up_proj.weight"], w[p + "down_proj.weight"] = gate, up, down


def build_weights() -> dict[str, np.ndarray]:
    th = thetas(HEAD_DIM, ROPE_BASE)
    rot = th[:N_ROT]
    half = HEAD_DIM // 2
    static = [i for i in range(STATIC0, half)] + [i + half for i in range(STATIC0, half)]
    scale = math.sqrt(HEAD_DIM)

    def put_rot(vec: np.ndarray, x: np.ndarray, gain: float) -> None:
        vec[:N_ROT] += x[:N_ROT] * gain
        vec[half:half + N_ROT] += x[N_ROT:] * gain

    w: dict[str, np.ndarray] = {}
    emb = np.zeros((V, HIDDEN), np.float32)
    for t, i in TOK.items():
        emb[i, CONST] = KC
        for name, val in features(t).items():
            emb[i, fdim(0, name)] = val
    w["model.embed_tokens.weight"] = emb
    norm_w = np.full(HIDDEN, KC / math.sqrt(HIDDEN), np.float32)

    # ---------------- layer 0
    q = np.zeros((N_HEADS * HEAD_DIM, HIDDEN), np.float32)
    k = np.zeros((HEAD_DIM, HIDDEN), np.float32)
    v = np.zeros((HEAD_DIM, HIDDEN), np.float32)
    o = np.zeros((HIDDEN, N_HEADS * HEAD_DIM), np.float32)
    k[:N_ROT, CONST] = 1.0 / KC
    k[static[0], fdim(0, "ask")] = 1.0
    k[static[1], fdim(0, "bos")] = 1.0
    for f in range(NF):
        v[f, fdim(0, FEAT[f])] = 1.0
    for h in range(N_OFF):
        off = h + 1
        x, t = offset_kernel(rot, off, MAX_LEN)
        col = np.zeros(HEAD_DIM)
        put_rot(col, x, OFFSET_GAP / t * scale)
        q[h * HEAD_DIM:(h + 1) * HEAD_DIM, CONST] = col / KC
        for f in range(NF):
            o[fdim(off, FEAT[f]), h * HEAD_DIM + f] = 1.0
    # asked-key head: M*ask + R2(D) + S*bos
    x, t = long_recency(rot, MAX_LEN)
    r2 = evaluate(rot, x, MAX_LEN)
    gain = 25.0 / t
    spread = float(r2.max() - r2.min()) * gain
    h = N_OFF
    col = np.zeros(HEAD_DIM)
    put_rot(col, x, gain * scale)
    q[h * HEAD_DIM:(h + 1) * HEAD_DIM, CONST] = col / KC
    s_b = spread + 25.0
    q[h * HEAD_DIM + static[1], CONST] = s_b * scale / KC
    q[h * HEAD_DIM + static[0], CONST] = (s_b + spread + 25.0) * scale / KC
    for kind in range(NKIND):
        o[AK + kind, h * HEAD_DIM + FI[f"a{kind}"]] = 1.0
    gate, up, down = _attention(w, 0, q, k, v, o)
    unit = 0
    for off in range(N_REC):          # virtual key kind at distance off = marker there AND asked kind
        for kind in range(NKIND):
            gate[unit, fdim(off, "marker")] = K_SILU
            gate[unit, AK + kind] = K_SILU
            gate[unit, CONST] = -K_SILU * 1.5 / KC
            up[unit, CONST] = 1.0 / K_SILU / KC
            down[fdim(off, f"k{kind}"), unit] = 2.0  # relu(1 + 1 - 1.5) = 0.5 -> 1
            unit += 1
    for off in range(N_CNT):          # nearest space at distance off: space there, digits before
        terms = [fdim(off, "space")] + [fdim(o2, f"d{d}") for o2 in range(off) for d in range(10)]
        for dim in terms:
            gate[unit, dim] = K_SILU
        gate[unit, CONST] = -K_SILU * (off + 0.5) / KC
        up[unit, CONST] = 1.0 / K_SILU / KC
        down[NEAR + off, unit] = 2.0
        unit += 1
    _fits(unit)
    _mlp(w, 0, gate, up, down)

    # ---------------- layer 1
    q = np.zeros((N_HEADS * HEAD_DIM, HIDDEN), np.float32)
    k = np.zeros((HEAD_DIM, HIDDEN), np.float32)
    v = np.zeros((HEAD_DIM, HIDDEN), np.float32)
    o = np.zeros((HIDDEN, N_HEADS * HEAD_DIM), np.float32)
    for off in range(N_REC):
        for kind in range(NKIND):
            for c in range(3):
                k[static[3 * off + c], fdim(off + 1, f"k{kind}")] = KEY_CODE[kind][c]
                q[static[3 * off + c], fdim(off, f"k{kind}")] = KEY_CODE[kind][c] * S_A / 2 * scale
    # same kind: 3 * S_A/2 = 1.5 S_A; other kind <= 0.5 S_A; sink S_A
    sink = 3 * N_REC
    k[static[sink], fdim(0, "bos")] = 1.0
    q[static[sink], CONST] = S_A * scale / KC
    for off in range(N_CNT):
        k[static[sink + 1 + off], fdim(off + 4, "space")] = 1.0
    if sink + N_CNT >= len(static):
        raise RuntimeError(f"layer 1 needs {sink + N_CNT + 1} static dims, has {len(static)}")
    k[:N_ROT, CONST] = 1.0 / KC
    x, t = recency_kernel(rot, 6, 6, MAX_LEN)
    rg = 25.0 / t
    col = np.zeros(HEAD_DIM)
    put_rot(col, x, rg * scale)
    q[HEAD_DIM:2 * HEAD_DIM, CONST] = col / KC
    r = evaluate(rot, x, MAX_LEN) * rg
    spread = float(r.max() - r.min())
    s_b = spread + 25.0
    m = s_b + spread + 25.0
    for off in range(N_CNT):
        q[HEAD_DIM + static[sink + 1 + off], NEAR + off] = m * scale
    q[HEAD_DIM + static[sink], CONST] = s_b * scale / KC
    for d in range(10):
        v[d, fdim(0, f"d{d}")] = 1.0
        v[11 + d, fdim(3, f"d{d}")] = 1.0
    v[10, fdim(0, "newline")] = 1.0
    v[21, fdim(3, "comma")] = 1.0
    v[22, fdim(2, "comma")] = 1.0
    v[23, fdim(2, "d9")] = 1.0
    v[24, fdim(1, "comma")] = 1.0
    v[25, fdim(1, "d9")] = 1.0
    v[26, fdim(0, "comma")] = 1.0
    v[27, fdim(0, "comma")] = 1.0   # recall copies commas too (chat count's first number)
    for d in range(10):
        o[OUT + TOK[str(d)], d] = G_A
    o[OUT + TOK["\n"], 10] = G_A
    o[OUT + TOK[","], 27] = G_A
    for i in range(16):
        o[SCR + i, HEAD_DIM + 11 + i] = 1.0
    gate, up, down = _attention(w, 1, q, k, v, o)
    dold = [SCR + d for d in range(10)]
    cold, c1, n1, c2, n2, c3 = (SCR + 10 + i for i in range(6))
    unit = 0

    def add_unit(terms: list[int], thresh: float, target: int, gain: float) -> None:
        nonlocal unit
        for dim in terms:
            gate[unit, dim] += K_SILU
        gate[unit, CONST] = -K_SILU * thresh / KC
        up[unit, CONST] = 1.0 / K_SILU / KC
        down[OUT + target, unit] = gain
        unit += 1

    for d in range(10):
        nxt = TOK[str((d + 1) % 10)]
        add_unit([dold[d]], 0.5, TOK[str(d)], A_C)
        add_unit([dold[d], c1], 1.5, nxt, 2 * A_C)
        add_unit([dold[d], n1, c2], 2.5, nxt, 2 * A_C)
        add_unit([dold[d], n1, n2, c3], 3.5, nxt, 2 * A_C)
    add_unit([cold], 0.5, TOK[","], 2 * A_C)
    add_unit([fdim(0, "comma")], 0.5, TOK[" "], A_C)
    add_unit([], -1.0, TOK["\n"], DEFAULT_LOGIT)  # always on: newline wins ties when nothing fires
    _fits(unit)
    _mlp(w, 1, gate, up, down)

    for layer in range(2):
        w[f"model.layers.{layer}.input_layernorm.weight"] = norm_w.copy()
        w[f"model.layers.{layer}.post_attention_layernorm.weight"] = norm_w.copy()
    w["model.norm.weight"] = norm_w.copy()
    head = np.zeros((V, HIDDEN), np.float32)
    for i in range(V):
        head[i, OUT + i] = 1.0
    w["lm_head.weight"] = head
    return w


def write_tokenizer(out: Path) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors  # type: ignore[import-not-found, unused-ignore]

    vocab = {t: i for i, t in enumerate(SPECIALS + CHARS)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    added = KEYS + ASKS + BIAS_WORDS
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])
    if any(tok.token_to_id(t) != i for i, t in enumerate(VOCAB)):
        raise RuntimeError("the tokenizer's ids are not the vocabulary's order")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                       special_tokens=[("<s>", 0)])
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": False,
        "clean_up_tokenization_spaces": False, "model_max_length": MAX_LEN,
        "chat_template": CHAT_TEMPLATE,
    }, indent=1))
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    (out / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))


def write_config(out: Path) -> None:
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": V, "hidden_size": HIDDEN, "intermediate_size": INTER,
        "num_hidden_layers": 2, "num_attention_heads": N_HEADS, "num_key_value_heads": 1,
        "head_dim": HEAD_DIM, "hidden_act": "silu", "max_position_embeddings": MAX_LEN,
        "rms_norm_eps": 1e-6, "rope_theta": ROPE_BASE, "rope_scaling": None,
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 0, "eos_token_id": 1, "do_sample": False}))


def _fits(units: int) -> None:
    if units > INTER:
        raise RuntimeError(f"{units} MLP units planned, {INTER} in the layer")


def main() -> None:
    from safetensors.numpy import save_file  # type: ignore[import-not-found, unused-ignore]

    family, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    w = build_weights()
    write_tokenizer(out)
    if family == "gemma3":
        from _tiny_task_gemma3 import gemma3_weights, write_gemma3_config  # type: ignore[import-not-found, unused-ignore]

        save_file(gemma3_weights(w), str(out / "model.safetensors"), metadata={"format": "pt"})
        write_gemma3_config(out)
        return
    if family in ("gemma4", "gemma4-wide"):
        from _tiny_task_gemma4 import (  # type: ignore[import-not-found, unused-ignore]
            add_gemma4_tokens,
            gemma4_weights,
            write_gemma4_config,
        )

        add_gemma4_tokens(out)
        save_file(gemma4_weights(w), str(out / "model.safetensors"), metadata={"format": "pt"})
        # The wide one's sliding layers see every prompt the probe sends whole (its window is
        # the context), as a real Gemma 4's 512 tokens see a short chat's.
        if family == "gemma4-wide":
            write_gemma4_config(out, sliding_window=MAX_LEN)
        else:
            write_gemma4_config(out)
        return
    save_file(w, str(out / "model.safetensors"), metadata={"format": "pt"})
    write_config(out)
    write_gguf(out, out / "model.gguf", inter=GGUF_INTER)


if __name__ == "__main__":
    main()
