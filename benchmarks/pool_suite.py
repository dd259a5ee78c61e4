"""A generated suite of single-file KernelBench solutions, for the bench's compile pool.

Writes DIR/KernelBench/level1/K_Name.py (the references, KernelBench format) and
DIR/runs/level_1_problem_K_sample_0_kernel.py (one `load_inline` solution per task, as KernelBench
run folders hold them): elementwise maps, two-input maps and row reductions, each an honest
kernel in C++ (`--device cpu`) or CUDA (`--device cuda`). Every extension has its own name, so
no task's build is another's.

    python benchmarks/pool_suite.py OUT --device cpu --tasks 40
"""

from __future__ import annotations

import argparse
from pathlib import Path

# name, the reference's expression of x, the kernel's expression of v (float)
UNARY = [
    ("ReLU", "torch.relu(x)", "v > 0.f ? v : 0.f"),
    ("LeakyReLU", "torch.nn.functional.leaky_relu(x, 0.01)", "v > 0.f ? v : 0.01f * v"),
    ("Sigmoid", "torch.sigmoid(x)", "1.f / (1.f + expf(-v))"),
    ("Tanh", "torch.tanh(x)", "tanhf(v)"),
    ("SiLU", "torch.nn.functional.silu(x)", "v / (1.f + expf(-v))"),
    ("GELU", "torch.nn.functional.gelu(x)", "0.5f * v * (1.f + erff(v * 0.70710678f))"),
    ("Square", "x * x", "v * v"),
    ("Cube", "x * x * x", "v * v * v"),
    ("Abs", "torch.abs(x)", "fabsf(v)"),
    ("Exp", "torch.exp(x)", "expf(v)"),
    ("Hardtanh", "torch.clamp(x, -1.0, 1.0)", "fminf(fmaxf(v, -1.f), 1.f)"),
    ("Hardsigmoid", "torch.nn.functional.hardsigmoid(x)", "fminf(fmaxf(v / 6.f + 0.5f, 0.f), 1.f)"),
    ("ELU", "torch.nn.functional.elu(x)", "v > 0.f ? v : expm1f(v)"),
    ("Softsign", "x / (1 + torch.abs(x))", "v / (1.f + fabsf(v))"),
    ("ScaleShift", "2.0 * x + 1.0", "2.f * v + 1.f"),
    ("Sin", "torch.sin(x)", "sinf(v)"),
    ("Cos", "torch.cos(x)", "cosf(v)"),
    ("Negate", "-x", "-v"),
    ("Rational", "1.0 / (1.0 + x * x)", "1.f / (1.f + v * v)"),
    ("Mish", "torch.nn.functional.mish(x)", "v * tanhf(v > 20.f ? v : log1pf(expf(v)))"),
    ("Hardswish", "torch.nn.functional.hardswish(x)", "v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f"),
    ("ReLU6", "torch.nn.functional.relu6(x)", "fminf(fmaxf(v, 0.f), 6.f)"),
    ("Sign", "torch.sign(x)", "(float)((v > 0.f) - (v < 0.f))"),
    ("Erf", "torch.erf(x)", "erff(v)"),
]
# name, the reference's expression of x and y, the kernel's of a and b
BINARY = [
    ("Add", "x + y", "a + b"),
    ("Mul", "x * y", "a * b"),
    ("Sub", "x - y", "a - b"),
    ("Maximum", "torch.maximum(x, y)", "fmaxf(a, b)"),
    ("Minimum", "torch.minimum(x, y)", "fminf(a, b)"),
    ("Axpy", "0.5 * x + y", "0.5f * a + b"),
]
# name, the reference's expression of x (rows reduced to one value), the accumulation, the finish
REDUCE = [
    ("RowSum", "torch.sum(x, dim=1)", "acc += v", "acc", "0.f"),
    ("RowMean", "torch.mean(x, dim=1)", "acc += v", "acc / (float)cols", "0.f"),
    ("RowMax", "torch.amax(x, dim=1)", "acc = fmaxf(acc, v)", "acc", "-INFINITY"),
    ("RowMin", "torch.amin(x, dim=1)", "acc = fminf(acc, v)", "acc", "INFINITY"),
    ("RowSumSquares", "torch.sum(x * x, dim=1)", "acc += v * v", "acc", "0.f"),
    ("RowL2Norm", "torch.linalg.vector_norm(x, dim=1)", "acc += v * v", "sqrtf(acc)", "0.f"),
]
SIZES = {"cpu": (512, 1024), "cuda": (4096, 8192)}


def reference(name: str, expr: str, arity: int, rows: int, cols: int) -> str:
    args = ", ".join(["x", "y"][:arity])
    inputs = ", ".join([f"torch.randn({rows}, {cols})"] * arity)
    return f'''import torch
import torch.nn as nn


class Model(nn.Module):
    """{name}."""

    def forward(self, {args}):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


def _cpu_body(kind: str, op: tuple[str, ...]) -> tuple[str, str]:
    """(the C++ function's parameters, its body) for one op on the CPU."""
    if kind == "unary":
        return (
            "torch::Tensor x",
            f"""  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = xc.numel();
  for (int64_t i = 0; i < n; ++i) {{ const float v = in[i]; o[i] = {op[2]}; }}
  return out;""",
        )
    if kind == "binary":
        return (
            "torch::Tensor x, torch::Tensor y",
            f"""  auto xc = x.contiguous();
  auto yc = y.contiguous();
  auto out = torch::empty_like(xc);
  const float* pa = xc.data_ptr<float>();
  const float* pb = yc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = xc.numel();
  for (int64_t i = 0; i < n; ++i) {{ const float a = pa[i], b = pb[i]; o[i] = {op[2]}; }}
  return out;""",
        )
    return (
        "torch::Tensor x",
        f"""  auto xc = x.contiguous();
  const int64_t rows = xc.size(0), cols = xc.size(1);
  auto out = torch::empty({{rows}}, xc.options());
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {{
    float acc = {op[4]};
    for (int64_t c = 0; c < cols; ++c) {{ const float v = in[r * cols + c]; {op[2]}; }}
    o[r] = {op[3]};
  }}
  return out;""",
    )


def _cuda_parts(kind: str, op: tuple[str, ...], fn: str) -> tuple[str, str]:
    """(the CUDA kernel, the host function's body) for one op."""
    if kind == "unary":
        kernel = f"""__global__ void {fn}_kernel(const float* __restrict__ in, float* __restrict__ o, int64_t n) {{
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {{ const float v = in[i]; o[i] = {op[2]}; }}
}}"""
        body = f"""  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const int64_t n = xc.numel();
  {fn}_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;"""
        return kernel, body
    if kind == "binary":
        kernel = f"""__global__ void {fn}_kernel(const float* __restrict__ pa, const float* __restrict__ pb,
                          float* __restrict__ o, int64_t n) {{
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {{ const float a = pa[i], b = pb[i]; o[i] = {op[2]}; }}
}}"""
        body = f"""  auto xc = x.contiguous();
  auto yc = y.contiguous();
  auto out = torch::empty_like(xc);
  const int64_t n = xc.numel();
  {fn}_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;"""
        return kernel, body
    # One block a row, a shared-memory tree over the block's partial results.
    combine = {"acc += v": "acc += v", "acc += v * v": "acc += v"}.get(op[2], op[2])
    kernel = f"""__global__ void {fn}_kernel(const float* __restrict__ in, float* __restrict__ o, int64_t cols) {{
  __shared__ float part[256];
  const float* row = in + blockIdx.x * cols;
  float acc = {op[4]};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {{ const float v = row[c]; {op[2]}; }}
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
    if (threadIdx.x < s) {{ float v = part[threadIdx.x + s]; acc = part[threadIdx.x]; {combine}; part[threadIdx.x] = acc; }}
    __syncthreads();
  }}
  if (threadIdx.x == 0) {{ acc = part[0]; o[blockIdx.x] = {op[3]}; }}
}}"""
    body = f"""  auto xc = x.contiguous();
  const int64_t rows = xc.size(0), cols = xc.size(1);
  auto out = torch::empty({{rows}}, xc.options());
  {fn}_kernel<<<rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), out.data_ptr<float>(), cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;"""
    return kernel, body


def solution(kind: str, op: tuple[str, ...], index: int, device: str) -> str:
    fn = f"{op[0].lower()}_forward"
    ext = f"pool_suite_{index}_{op[0].lower()}_{device}"
    params = "torch::Tensor x, torch::Tensor y" if kind == "binary" else "torch::Tensor x"
    args = "x, y" if kind == "binary" else "x"
    if device == "cpu":
        _, body = _cpu_body(kind, op)
        sources = f'''cpp_source = r"""
#include <cmath>
torch::Tensor {fn}({params}) {{
{body}
}}
"""

ext = load_inline(name="{ext}", cpp_sources=cpp_source, functions=["{fn}"], extra_cflags=["-O2"], verbose=False)
'''
    else:
        kernel, body = _cuda_parts(kind, op, fn)
        sources = f'''cpp_source = "torch::Tensor {fn}({params});"

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cmath>

{kernel}

torch::Tensor {fn}({params}) {{
{body}
}}
"""

ext = load_inline(name="{ext}", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["{fn}"], verbose=False)
'''
    return f"""import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

{sources}

class ModelNew(nn.Module):
    def forward(self, {args}):
        return ext.{fn}({args})
"""


def ops() -> list[tuple[str, tuple[str, ...], int]]:
    return (
        [("unary", op, 1) for op in UNARY] + [("binary", op, 2) for op in BINARY] + [("reduce", op, 1) for op in REDUCE]
    )


def write_suite(out: Path, device: str, tasks: int) -> list[str]:
    """The first `tasks` tasks (cycling through the ops, each copy its own extension) and their
    solutions under `out`; returns the task names."""
    level = out / "KernelBench" / "level1"
    runs = out / "runs"
    level.mkdir(parents=True, exist_ok=True)
    runs.mkdir(parents=True, exist_ok=True)
    rows, cols = SIZES[device]
    catalogue = ops()
    names = []
    for k in range(1, tasks + 1):
        kind, op, arity = catalogue[(k - 1) % len(catalogue)]
        name = op[0] if k <= len(catalogue) else f"{op[0]}{k}"
        (level / f"{k}_{name}.py").write_text(reference(name, op[1], arity, rows, cols))
        (runs / f"level_1_problem_{k}_sample_0_kernel.py").write_text(solution(kind, op, k, device))
        names.append(name)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--tasks", type=int, default=len(ops()))
    args = parser.parse_args()
    names = write_suite(args.out, args.device, args.tasks)
    print(f"{len(names)} tasks and solutions for {args.device} in {args.out}")


if __name__ == "__main__":
    main()
