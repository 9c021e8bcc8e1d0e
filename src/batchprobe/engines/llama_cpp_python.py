"""llama-cpp-python's own OpenAI server (`python -m llama_cpp.server`).

It serves one request at a time behind a lock: there is no batching to turn on, so "simple"
and "batching" launch the same server. Its bindings compile from the sdist (several minutes
on two cores; cached by version).
"""

from __future__ import annotations

from batchprobe.engines._base import PipEngine
from batchprobe.engines._known import KnownIssue
from batchprobe.engines._types import Capabilities, Installation, LaunchSpec, PlatformName

CTX = 4096
# scikit-build-core settings: a portable build, without the multimodal (llava/mtmd) library.
_BUILD = ("-C", "cmake.define.GGML_NATIVE=OFF", "-C", "cmake.define.LLAVA_BUILD=OFF")

INTERRUPTED_STREAMS = KnownIssue(
    issue_id="llama-cpp-python-interrupt-requests",
    title="llama-cpp-python's server cuts a stream off as soon as another request waits",
    patterns=(r"no_finish_reason:",),
    where="body",
    explanation=(
        "llama_cpp.server serves one request at a time behind a lock. With its default "
        "interrupt_requests=True, a streaming response checks after every chunk whether another "
        "request is waiting for the lock and, if one is, sends [DONE] at once, with no "
        "finish_reason: the client gets a truncated answer that looks finished "
        "(llama-cpp-python #867, #897). It is not batching: concurrent requests are served "
        "one after another."
    ),
    remedy=(
        "Launch with `--interrupt_requests False` (batchprobe: --engine-arg=--interrupt_requests "
        "--engine-arg=False) to serve concurrent requests whole, one at a time; for real "
        "batching use llama.cpp's llama-server."
    ),
)


class LlamaCppPython(PipEngine):
    """llama_cpp.server: no batching; one request at a time."""

    name = "llama-cpp-python"
    default_model = "gemma3-270m"
    model_format = "gguf"
    aliases = ("llama_cpp_python", "llama_cpp.server")
    description = "llama-cpp-python's OpenAI server (GGUF models, one request at a time)."
    package = "llama-cpp-python"
    default_version = "0.3.36"
    readiness_path = "/v1/models"
    known_issues = (INTERRUPTED_STREAMS,)
    capabilities = Capabilities(default_api="completions", request_id_header=False)

    def pip_requirements(self, version: str, platform: PlatformName) -> list[list[str]]:
        if platform == "macos-arm64":
            return [[f"llama-cpp-python[server]=={version}"]]
        return [[f"llama-cpp-python[server]=={version}", *_BUILD]]

    def launch_argv(self, inst: Installation, spec: LaunchSpec) -> list[str]:
        return [
            str(inst.python),
            "-m",
            "llama_cpp.server",
            "--model",
            spec.model,
            "--host",
            spec.host,
            "--port",
            str(spec.port),
            "--n_ctx",
            str(CTX),
        ]


ENGINE = LlamaCppPython()
