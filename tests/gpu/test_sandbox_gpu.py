"""CUDA inside the bubblewrap sandbox: the device nodes are passed through, torch sees the GPU,
nvcc-built kernels run, and torch's JIT extension build works, while the sandbox still denies
the network and the locked files.

Run on the GPU machine: pytest -m gpu -p no:cacheprovider -q tests/gpu/test_sandbox_gpu.py
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cuda_agent_cli.actions import ActionContext, make_toolbox
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, gpu_devices, probe

pytestmark = pytest.mark.gpu

LOCKED = ["model.py", "binding.cpp", "binding_registry.h", "SKILL.md"]

ADD_CU = r"""
#include <cstdio>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
int main() {
  const int n = 1 << 20;
  float *a, *b, *c;
  cudaMallocManaged(&a, n * sizeof(float));
  cudaMallocManaged(&b, n * sizeof(float));
  cudaMallocManaged(&c, n * sizeof(float));
  for (int i = 0; i < n; ++i) { a[i] = 1.0f; b[i] = 2.0f; }
  add<<<(n + 255) / 256, 256>>>(a, b, c, n);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) { std::printf("cuda error: %s\n", cudaGetErrorString(err)); return 1; }
  double s = 0; for (int i = 0; i < n; ++i) s += c[i];
  std::printf("sum=%.0f\n", s);
  return 0;
}
"""

EXT_PY = r"""
import torch
from torch.utils.cpp_extension import load_inline
src = '''
__global__ void twice(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.f * x[i]; }
torch::Tensor run(torch::Tensor x) {
  auto y = torch::empty_like(x); int n = x.numel();
  twice<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y; }
'''
ext = load_inline("sandbox_twice", cpp_sources="torch::Tensor run(torch::Tensor x);",
                  cuda_sources=src, functions=["run"], verbose=False)
x = torch.arange(1024, device="cuda", dtype=torch.float32)
assert torch.equal(ext.run(x), 2 * x)
print("extension-ok")
"""


@pytest.fixture
def box(tmp_path: Path):
    status = probe()
    assert status.available, f"the sandbox cannot run here: {status.detail}"
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    for name in LOCKED:
        (ws / name).write_text(f"# pristine {name}\n")
    (ws / "model_new.py").write_text("# candidate\n")
    sb = Sandbox(SandboxPolicy.optimize(ws, LOCKED))
    sb.prepare()
    tb = make_toolbox(ActionContext(sb))
    yield tb
    tb.close()


def bash(tb, command: str, timeout_ms: int = 300_000):
    return tb.call("Bash", {"command": command, "timeout": timeout_ms})


def test_gpu_device_nodes_are_passed_through(box) -> None:
    assert any(d.startswith("/dev/nvidia") for d in gpu_devices()), "no /dev/nvidia* on this machine"
    r = bash(box, "ls /dev/nvidia*; nvidia-smi -L || true")
    assert not r.is_error, r.output
    assert "/dev/nvidiactl" in r.output


def test_torch_uses_cuda_inside(box) -> None:
    r = bash(
        box,
        'python -c "import torch; assert torch.cuda.is_available(); '
        "x = torch.ones(1 << 20, device='cuda'); print('gpu', torch.cuda.get_device_name(0), (x * 3).sum().item())\"",
    )
    assert not r.is_error, r.output
    assert "gpu" in r.output and "3145728.0" in r.output


def test_nvcc_kernel_compiles_and_runs_inside(box) -> None:
    box.call("Write", {"file_path": "kernels/add.cu", "content": ADD_CU})
    r = bash(box, "nvcc -O2 -arch=native -o /tmp/add kernels/add.cu && /tmp/add")
    assert not r.is_error, r.output
    assert "sum=3145728" in r.output


def test_torch_extension_jit_build_runs_inside(box) -> None:
    box.call("Write", {"file_path": "scratch/ext.py", "content": EXT_PY})
    r = bash(box, "python scratch/ext.py", 600_000)
    assert not r.is_error, r.output
    assert "extension-ok" in r.output


def test_the_sandbox_still_holds_with_the_gpu_visible(box) -> None:
    ws = box.ctx.root
    before = hashlib.sha256((ws / "model.py").read_bytes()).hexdigest()
    assert bash(box, "echo hacked > model.py").is_error
    assert bash(box, "exec 3<>/dev/tcp/1.1.1.1/53", 20_000).is_error
    assert hashlib.sha256((ws / "model.py").read_bytes()).hexdigest() == before
