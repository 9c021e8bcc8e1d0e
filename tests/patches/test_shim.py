"""The sitecustomize shim, in plain processes and in real mlx-vlm / vllm-mlx 0.3.0 processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from batchprobe.engines import install, launch
from batchprobe.patches import patch_outcomes, shim_dir, shim_env

from .conftest import VLLM_MLX_MLX_VLM, mlx_vlm_python
from .stub_gemma4 import write_stub

PROBE = Path(__file__).with_name("_vllm_mlx_probe.py")


def run_python(
    python: Path | str,
    args: list[str],
    *,
    patches: str | None,
    extra_path: list[Path] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BATCHPROBE_PATCHES")}
    if patches is not None:
        env["BATCHPROBE_PATCHES"] = patches
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [shim_dir(), *(extra_path or [])])
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_shim_is_inert_in_a_process_without_mlx_vlm() -> None:
    done = run_python(
        sys.executable,
        ["-c", "import sys; print('mlx_vlm' in sys.modules)"],
        patches="gemma4-attention",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"  # nothing imported eagerly
    assert "gemma4-attention armed" in done.stderr


def test_shim_logs_an_unknown_patch_and_carries_on() -> None:
    done = run_python(sys.executable, ["-c", "print('up')"], patches="no-such-patch")
    assert done.returncode == 0
    assert done.stdout.strip() == "up"
    assert "no patch named 'no-such-patch'" in done.stderr


@pytest.mark.parametrize("name", ["registry", "shim"])
def test_shim_refuses_modules_that_are_not_patches(name: str) -> None:
    done = run_python(sys.executable, ["-c", "print('up')"], patches=name)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "up"
    assert "not a" in done.stderr


def test_shim_runs_the_sitecustomize_it_shadows(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['SHADOWED_RAN'] = '1'\n")
    done = run_python(
        sys.executable,
        ["-c", "import os; print(os.environ.get('SHADOWED_RAN'))"],
        patches="gemma4-attention",
        extra_path=[tmp_path],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


@pytest.mark.engine
def test_shim_patches_when_mlx_vlm_gemma4_is_imported() -> None:
    code = (
        "import mlx_vlm.models.gemma4.language as l; "
        "print(l.Attention.__call__.__module__, l.Attention._batch_patched)"
    )
    done = run_python(mlx_vlm_python(VLLM_MLX_MLX_VLM), ["-c", code], patches="gemma4-attention")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["_batchprobe_patch_gemma4_attention", "True"]


@pytest.fixture(scope="module")
def vllm_mlx_python() -> Path:
    python = install("vllm-mlx==0.3.0").python
    assert python is not None
    return python


@pytest.mark.engine
@pytest.mark.parametrize(
    ("patches", "expected_module"),
    [
        (None, "vllm_mlx.patches.gemma4_mllm"),  # vllm-mlx's own, broken for mlx-vlm >= 0.5.0
        ("gemma4-attention", "_batchprobe_patch_gemma4_attention"),
    ],
)
def test_ours_wins_after_vllm_mlx_starts_batching(
    vllm_mlx_python: Path, tiny_gemma4: Path, patches: str | None, expected_module: str
) -> None:
    done = run_python(vllm_mlx_python, [str(PROBE), str(tiny_gemma4)], patches=patches)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["module"] == expected_module
    assert result["marked"] is (patches is not None)


def _chat(base_url: str, model_id: str, text: str) -> dict[str, Any]:
    body = json.dumps(
        {
            "model": model_id,
            "max_tokens": 8,
            "temperature": 0,
            "messages": [{"role": "user", "content": text}],
        }
    ).encode()
    request = urllib.request.Request(
        f"{base_url}/v1/chat/completions", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        reply: dict[str, Any] = json.loads(response.read())
    choice: dict[str, Any] = reply["choices"][0]
    return choice


def _serve_two_concurrent(model: Path, log: Path, patches: list[str]) -> list[dict[str, Any]]:
    # vllm-mlx persists its prefix cache under ~/.cache/vllm-mlx and reloads it at start-up: a
    # HOME of its own keeps one run's cache out of the next.
    env = {**shim_env(patches), "HOME": str(log.parent / f"home-{log.stem}")}
    with (
        launch(
            "vllm-mlx==0.3.0",
            model,
            "batching",
            2,
            log_path=log,
            extra_env=env,
            pythonpath_prepend=[shim_dir()] if patches else None,
        ) as engine,
        ThreadPoolExecutor(2) as pool,
    ):
        texts = ["the code is seven", "tell me the secret key of the river please"]
        return list(pool.map(lambda t: _chat(engine.base_url, engine.model_id, t), texts))


@pytest.mark.engine
def test_served_batching_errors_without_the_patch_and_works_with_it(
    vllm_mlx_python: Path, tiny_gemma4: Path, tmp_path: Path
) -> None:
    stock = _serve_two_concurrent(tiny_gemma4, tmp_path / "stock.log", [])
    assert [c["finish_reason"] for c in stock] == ["error", "error"]
    assert "unexpected keyword argument 'shared_kv'" in (tmp_path / "stock.log").read_text()
    patched = _serve_two_concurrent(tiny_gemma4, tmp_path / "patched.log", ["gemma4-attention"])
    assert all(c["finish_reason"] in ("stop", "length") for c in patched), patched
    assert all(c["message"]["content"] for c in patched)
    log = (tmp_path / "patched.log").read_text()
    assert "gemma4-attention: replaced" in log and "shared_kv" not in log


@pytest.mark.parametrize(
    ("new", "imported", "outcome"),
    [(True, True, "applied"), (False, True, "not applied"), (True, False, "not reached")],
    ids=["mirrored-signature", "older-signature", "never-imported"],
)
def test_the_shim_says_whether_a_patch_applied_in_a_line_batchprobe_reads_back(
    tmp_path: Path, new: bool, imported: bool, outcome: str
) -> None:
    stub = write_stub(tmp_path, new=new)
    code = "import mlx_vlm.models.gemma4.language" if imported else "pass"
    done = run_python(sys.executable, ["-c", code], patches="gemma4-attention", extra_path=[stub])
    assert done.returncode == 0, done.stderr
    assert patch_outcomes(["gemma4-attention"], done.stderr.splitlines()) == {
        "gemma4-attention": outcome
    }, done.stderr
