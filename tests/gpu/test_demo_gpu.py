"""`cuda-agent demo` on a CUDA GPU: the recorded CUDA session must earn reward 3 (more than 5%
faster than both eager PyTorch and torch.compile, measured by the harness) and apply into a
temporary git repository where the patched module runs the kernel and matches the original.

Run on the GPU machine: pytest -m gpu -s tests/gpu/test_demo_gpu.py
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

CHECK = textwrap.dedent("""
    import torch
    from vit_head import PooledLayerNorm
    original = PooledLayerNorm.forward.__wrapped__
    torch.manual_seed(0)
    m = PooledLayerNorm(768).cuda().eval()
    torch.nn.init.normal_(m.norm.weight); torch.nn.init.normal_(m.norm.bias)
    x = torch.randn(32, 1024, 768, device="cuda")
    with torch.no_grad():
        y, r = m(x), original(m, x)
        assert PooledLayerNorm.forward._cuda_agent_route(m, (x,), {})[0], "the kernel was not used"
        err = (y - r).abs().max().item()
        assert torch.allclose(y, r, atol=1e-4, rtol=1e-4), err
        small = torch.randn(4, 7, 768, device="cuda")      # a shape never verified: original code
        assert torch.equal(m(small), original(m, small))
        cpu = m.cpu()
        xc = x[:2].cpu()
        assert torch.equal(cpu(xc), original(cpu, xc))      # CPU: original code, same results
        m.cuda()
        def bench(fn):
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(100):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) * 10.0  # us per call
        print(f"patched module: kernel {bench(lambda: m(x)):.1f} us, original {bench(lambda: original(m, x)):.1f} us, "
              f"max abs error {err:.2e}")
""")


def test_cuda_demo_earns_reward_3_and_applies(tmp_path: Path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_") and not k.endswith("_API_KEY")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    where = tmp_path / "demo"
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
            "--patch",
            str(tmp_path / "demo.diff"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(proc.stderr[-4000:])
    assert proc.stdout.strip(), proc.stderr
    out = json.loads(proc.stdout)
    print(f"\nCUDA demo on {(out.get('environment') or {}).get('gpu')}: {json.dumps(out.get('timings'))}")
    assert proc.returncode == 0, out
    assert out["status"] == "improved" and out["reward"] == 3, out
    assert out["speedups"]["vs_compile"] > 1.05 and out["speedups"]["vs_eager"] > 1.05
    assert out["applied"] is True and out["branch"].startswith("cuda-agent/pooled_layer_norm-")
    log = subprocess.run(["git", "log", "--format=%s", "-1"], cwd=where, capture_output=True, text=True).stdout
    assert "runs a verified cuda kernel" in log
    run = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=where, env=env, capture_output=True, text=True, timeout=1800
    )
    print(run.stdout)
    assert run.returncode == 0, run.stderr[-4000:]
