"""`cuda-agent check` on the H200: the CUDA demo applied, then the full check (verify + profile
through the harness on the GPU) in under 30 s, and `cuda-agent build` then a first call that
needs no build.

Run on the GPU machine: python -m pytest -m gpu -s tests/gpu/test_check_gpu.py
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def _env(tmp: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CUDA_AGENT_", "GITHUB_")) and not k.endswith("_API_KEY")
    }
    env.update(XDG_DATA_HOME=str(tmp / "data"), XDG_CONFIG_HOME=str(tmp / "config"))
    return env


@pytest.fixture(scope="module")
def cuda_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    tmp = tmp_path_factory.mktemp("check-gpu")
    where = tmp / "demo"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent_cli",
            "demo",
            "--device",
            "cuda",
            "--dir",
            str(where),
            "--batch",
            "--json",
            "--yes",
        ],
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["applied"], proc.stderr[-3000:]
    return where


def test_full_check_of_the_cuda_demo_is_green_and_under_30_s(cuda_demo: Path):
    env = _env(cuda_demo.parent)
    fast = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "check", "--fast", "--json"],
        cwd=cuda_demo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fast.returncode == 0 and json.loads(fast.stdout)["kernels"][0]["status"] == "OK", fast.stdout
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "check", "--json"],
        cwd=cuda_demo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    seconds = time.perf_counter() - start
    out = json.loads(proc.stdout)
    k = out["kernels"][0]
    print(f"\nfull check of the CUDA demo: {seconds:.1f} s, {k['status']}, measured {json.dumps(k['measured'])}")
    assert proc.returncode == 0 and k["status"] in ("OK", "IMPROVED"), k
    assert k["measured"]["correct"] is True and k["measured"]["timings"]["speedup_vs_compile"] > 1.0
    assert seconds < 30, f"full check took {seconds:.1f} s"
    again = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "check", "--json"],
        cwd=cuda_demo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(f"second full check (build reused): {time.perf_counter() - again:.1f} s")


def test_build_then_first_call_on_the_gpu_is_fast(cuda_demo: Path, tmp_path: Path):
    env = {**_env(cuda_demo.parent), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "build", str(cuda_demo), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["kernels"][0]["ok"]
    code = (
        "import time, torch\nfrom vit_head import PooledLayerNorm\n"
        "m = PooledLayerNorm(768).cuda().eval()\nx = torch.randn(32, 1024, 768, device='cuda')\n"
        "torch.cuda.synchronize()\nt = time.perf_counter()\nwith torch.no_grad():\n"
        "    used = PooledLayerNorm.forward._cuda_agent_route(m, (x,), {})[0]\n"
        "torch.cuda.synchronize()\nprint('used', used, time.perf_counter() - t)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cuda_demo,
        env={**env, "PYTHONPATH": str(cuda_demo)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(run.stdout, run.stderr[-2000:])
    assert run.returncode == 0 and run.stdout.startswith("used True") and "building" not in run.stderr
    assert float(run.stdout.split()[-1]) < 2.0
