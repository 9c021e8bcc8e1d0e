"""vllm-mlx (`vllm-mlx serve`): simple engine, or `--continuous-batching`."""

from __future__ import annotations

from packaging.version import Version

from batchprobe.engines._base import PipEngine
from batchprobe.engines._known import KnownIssue
from batchprobe.engines._types import Capabilities, Installation, LaunchSpec, PlatformName
from batchprobe.paths import huggingface_home

SHARED_KV = KnownIssue(
    issue_id="vllm-mlx-gemma4-shared-kv",
    title="vllm-mlx's Gemma-4 attention patch rejects `shared_kv` under continuous batching",
    patterns=(r"unexpected keyword argument 'shared_kv'",),
    affected="<0.4.0",
    explanation=(
        "With --continuous-batching, vllm-mlx replaces mlx-vlm's Gemma-4 Attention.__call__ with "
        "its own _patched_call, whose signature predates mlx-vlm's `shared_kv` argument (KV sharing "
        "between layers). Every batched request fails inside the model, and the server answers "
        "HTTP 200 with finish_reason 'error' and no text; the simple engine is unaffected."
    ),
    remedy=(
        "Upgrade to vllm-mlx>=0.4.0, or launch with batchprobe's runtime patch "
        "(`--patch gemma4-attention`), or serve without --continuous-batching."
    ),
    fixed_in="0.4.0",
    patch="gemma4-attention",
)

BUSY_503 = KnownIssue(
    issue_id="vllm-mlx-simple-busy-503",
    title="vllm-mlx's simple engine refuses overlapping requests (HTTP 503 text_generation_busy)",
    patterns=(r"text_generation_busy",),
    explanation=(
        "Without --continuous-batching, vllm-mlx serves one generation at a time and answers any "
        "request that arrives meanwhile with 503 text_generation_busy. This is serial by design."
    ),
    remedy="Send one request at a time, or start the server with --continuous-batching.",
    is_bug=False,
)


SLIDING_WINDOW_HIT = KnownIssue(
    issue_id="vllm-mlx-sliding-window-cache-hit",
    title="vllm-mlx answers a prompt its prefix cache holds whole from a sliding window it "
    "cannot trim back",
    # A wrong answer of its own kind, and the log's hit that served that request's whole prompt.
    patterns=(r"^(count_broke|recall_miss|cross_talk): ",),
    log_patterns=(
        (r"\[cache_fetch\] (?:request=\S+ )?HIT prompt_tokens=(?P<prompt_tokens>\d+) "
         r"cached=(?P=prompt_tokens) remaining=0\b"),
    ),
    where="finding",
    affected="<0.5.0",
    explanation=(
        "The prefix cache serves a prompt whole from a stored entry longer than it (an earlier "
        "request's prompt and answer), trimming the stored KV back to the prompt. A sliding-window "
        "layer (Gemma 3's RotatingKVCache) whose window has already wrapped cannot be trimmed: "
        "the positions it overwrote are gone, so the request goes on from a context that is "
        "not its prompt and answers wrong, silently (no error; the log shows only the hit, "
        "'cached=N remaining=0'). 0.5.0 asks each layer whether it can be trimmed before it "
        "reuses a longer or partly matching entry (vllm-mlx #678, fixed by #680)."
    ),
    remedy=(
        "Upgrade to vllm-mlx>=0.5.0, or serve sliding-window models (Gemma 3) with "
        "--disable-prefix-cache."
    ),
    fixed_in="0.5.0",
)


PREFIX_LCP_LEAK = KnownIssue(
    issue_id="vllm-mlx-prefix-lcp-leak",
    title="vllm-mlx's prefix cache hands a request KV another request wrote (Gemma-4, "
    "continuous batching)",
    # Silent: another session's answer, on the multimodal path, whose prefix cache is on
    # whatever the flags say (0.2.x builds its config without --disable-prefix-cache).
    patterns=(r"^cross_talk: ",),
    where="finding",
    log_patterns=(r"MLLMBatchGenerator: KV prefix cache enabled",),
    affected="<0.2.9",
    explanation=(
        "When a prompt shares only its beginning with a stored prefix-cache entry (the longest "
        "common prefix), the cache hands the request a copy of that entry cut back to the "
        "shared length. For a plain KVCache the copy kept the entry's own key and value "
        "arrays, so the request's prefill wrote its tokens' KV into them in place: the stored "
        "entry then held another prompt's KV under its own tokens, and the next request it "
        "served (a re-send, a later turn, or a batch-mate sharing its prefix) answered from "
        "that other prompt. Reported as vllm-mlx #384 on Gemma 4 at 12-32 concurrent chats; "
        "fixed in 0.2.9 by slicing the arrays to the shared length (#385)."
    ),
    remedy="Upgrade to vllm-mlx>=0.2.9.",
    fixed_in="0.2.9",
)


class VllmMlx(PipEngine):
    """vllm-mlx: an MLX port of vLLM's server; multimodal models go through mlx-vlm."""

    name = "vllm-mlx"
    aliases = ("vllm_mlx",)
    description = "vLLM-style OpenAI server on MLX (text via mlx-lm, multimodal via mlx-vlm)."
    package = "vllm-mlx"
    default_version = "0.6.0"
    known_issues = (SHARED_KV, BUSY_503, SLIDING_WINDOW_HIT, PREFIX_LCP_LEAK)
    # MLX's CPU matmul (~5 GFLOPS here) takes a minute per gemma3-270m haystack; the constructed
    # tiny llama does the tasks at a few hundred tokens a second.
    default_model = "tiny-llama"
    capabilities = Capabilities(default_api="completions")

    def pip_requirements(self, version: str, platform: PlatformName) -> list[list[str]]:
        if platform == "macos-arm64":
            return [[f"vllm-mlx=={version}"]]
        # A plain Linux install drags in a 6.5 GB CUDA torch; the CPU wheel is enough.
        torch = ["torch==2.13.0", "torchvision==0.28.*"]
        if Version(version) < Version("0.3.0"):
            # 0.2.x asks only for floors, and today's MLX stops it serving ("There is no
            # Stream(cpu, 1) in current thread" in its batch thread): the stack of its release.
            return [["mlx[cpu]==0.31.2", "mlx-lm==0.31.2", "mlx-vlm==0.4.4",
                     f"vllm-mlx=={version}", *torch]]
        return [["mlx[cpu]", f"vllm-mlx=={version}", *torch]]

    def post_install(self, platform: PlatformName) -> list[list[str]]:
        if platform == "macos-arm64":
            return []
        # PyPI's torchvision beside a CPU torch breaks mlx-vlm imports
        # ("operator torchvision::nms does not exist"); mlx-vlm runs without it.
        return [["{python}", "-m", "pip", "uninstall", "-y", "torchvision"]]

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        if inst.root is None:
            raise TypeError("vllm-mlx needs a managed environment")
        argv = [
            str(inst.root / "bin" / "vllm-mlx"),
            "serve",
            spec.model,
            "--host",
            spec.host,
            "--port",
            str(spec.port),
        ]
        if not spec.prefix_cache:
            # vllm-mlx saves its prefix cache under ~/.cache/vllm-mlx on shutdown and reloads
            # it at start-up, so a restart alone would not keep the next arm's cache cold.
            argv.append("--disable-prefix-cache")
        if spec.mode == "batching":
            argv += ["--continuous-batching", "--max-num-seqs", str(spec.concurrency)]
        return argv

    def launch_env(self, inst: Installation, spec: LaunchSpec) -> dict[str, str]:
        if spec.state_dir is None:
            return {}
        # With its prefix cache on (the repeat wave), vllm-mlx saves the cache under
        # ~/.cache/vllm-mlx/prefix_cache/<model path> on shutdown and loads it at start-up,
        # whichever version saved it: a launch would start warm with an earlier run's (or an
        # earlier version's) KV. A home of the launch's own keeps every launch cold and leaves
        # the user's cache alone; the Hugging Face cache stays where it is.
        return {"HOME": str(spec.state_dir), "HF_HOME": str(huggingface_home())}


ENGINE = VllmMlx()
