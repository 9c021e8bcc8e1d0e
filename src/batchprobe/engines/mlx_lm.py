"""mlx-lm's OpenAI-compatible server (`python -m mlx_lm.server`)."""

from __future__ import annotations

from packaging.version import Version

from batchprobe.engines._base import PipEngine
from batchprobe.engines._known import KnownIssue
from batchprobe.engines._types import Installation, LaunchSpec, PlatformName

ROTATING_MERGE = KnownIssue(
    issue_id="mlx-lm-rotating-cache-merge",
    title="mlx-lm's batch generator crashes merging sliding-window caches of different lengths",
    patterns=(r"BatchRotatingKVCache\.merge", r"keys\[i : i \+ 1, :, p : p \+ c\._idx\]"),
    where="log",
    affected="<0.31.2",
    explanation=(
        "When prompts are prefilled together and one of them starts from a stored prompt cache, "
        "BatchRotatingKVCache.merge copies each row's sliding-window keys into a batch sized for "
        "the longest row, and a row whose window already wrapped does not fit: ValueError "
        "[broadcast_shapes] in the generation thread. The thread dies, /v1/models keeps "
        "answering, and every request after it hangs (mlx-lm #983; merge rewritten in 0.31.2)."
    ),
    remedy="Upgrade to mlx-lm>=0.31.2, or serve sliding-window models (Gemma 3) one at a time.",
    fixed_in="0.31.2",
)

EXACT_CACHE_HIT = KnownIssue(
    issue_id="mlx-lm-exact-cache-hit",
    title="mlx-lm's generation thread dies on a prompt its prompt cache holds whole",
    patterns=(r"has an empty prompt", r"if len\(seq\[-1\]\) != 1:"),
    where="log",
    affected=">=0.31.2",
    explanation=(
        "The server stores each finished request's KV under its prompt plus its generated "
        "tokens. A later prompt equal to such a key (a completions client continuing a text with "
        "its whole completion, a chat client re-sending a finished turn) is an exact hit that "
        "leaves no token to process, and the batch generator is handed an empty prompt: the "
        "generation thread dies (IndexError in insert_segments on 0.31.x, after which every "
        "request hangs; 'Sequence N has an empty prompt' on 0.32.x, after which every request "
        "fails). Measured on 0.31.2 and 0.32.2, the latest release."
    ),
    remedy=(
        "Run with batchprobe's runtime patch (--patch mlx-lm-exact-cache-hit), which leaves an "
        "exact hit's last token to process."
    ),
    patch="mlx-lm-exact-cache-hit",
)

CHECKPOINT_LAST_ROW = KnownIssue(
    issue_id="mlx-lm-checkpoint-last-row",
    title="mlx-lm 0.31.0 stores every batched chat prompt's checkpoint from the batch's last row",
    # A chat answer with another session's code, served from its prompt cache.
    patterns=(r"^cross_talk: .*prompt tokens cached.*\bchat\)",),
    where="finding",
    affected="==0.31.0",
    explanation=(
        "The server checkpoints each chat prompt's KV (all but its last token) when prompts are "
        "prefilled together, but the callback's generator binds the row index late: every "
        "checkpoint holds the batch's last row. A request that the checkpoint serves (the same "
        "prompt re-sent while the first still decodes) answers from another prompt's context, "
        "silently: no error, no log line (mlx-lm #965; fixed in 0.31.1)."
    ),
    remedy="Upgrade to mlx-lm>=0.31.1, or send chat prompts through /v1/completions.",
    fixed_in="0.31.1",
)


def _minor(version: str) -> str:
    """``0.31`` of ``0.31.1``: the mlx release line an mlx-lm version was made with."""
    release = Version(version).release
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


class MlxLm(PipEngine):
    """mlx-lm batches concurrent requests by itself; "simple" caps both concurrencies at 1."""

    name = "mlx-lm"
    aliases = ("mlx_lm",)
    description = "Apple MLX's reference server (mlx_lm.server); MLX-format model directories."
    package = "mlx-lm"
    default_version = "0.32.2"
    known_issues = (ROTATING_MERGE, EXACT_CACHE_HIT, CHECKPOINT_LAST_ROW)
    # MLX's CPU matmul (~5 GFLOPS here) takes a minute per gemma3-270m haystack; the constructed
    # tiny llama does the tasks at a few hundred tokens a second.
    default_model = "tiny-llama"
    # A model that fails to load kills the generation thread; the HTTP server keeps
    # answering /health with 503 forever.
    fatal_startup_patterns = (r"generation thread died",)

    def pip_requirements(self, version: str, platform: PlatformName) -> list[list[str]]:
        if platform == "macos-arm64":
            return [[f"mlx-lm=={version}"]]
        # Linux has no Metal: mlx's CPU backend is a separate extra. mlx-lm is released in
        # step with mlx and asks only for a floor: a later mlx breaks an older mlx-lm (0.31.x
        # under mlx 0.32: "There is no Stream(cpu, 0) in current thread" at the first batch).
        return [[f"mlx[cpu]=={_minor(version)}.*", f"mlx-lm=={version}"]]

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        slots = 1 if spec.mode == "simple" else spec.concurrency
        return [
            str(inst.python),
            "-m",
            "mlx_lm.server",
            "--model",
            spec.model,
            "--host",
            spec.host,
            "--port",
            str(spec.port),
            "--decode-concurrency",
            str(slots),
            "--prompt-concurrency",
            str(slots),
        ]


ENGINE = MlxLm()
