"""Two benchmark tasks with correct hand-written kernels, shared by the harness benchmarks and
the gpu tests: an axpby-style elementwise task (as in CUDA-Agent's agent_workdir example) and a
level-2-style GEMM with a fused epilogue (cuBLAS for the GEMM, allowed under strict policy, and
our own bias + ReLU + scale kernel).
"""

from __future__ import annotations

from pathlib import Path

AXPBY_REF = """
import torch
import torch.nn as nn

N = 1 << 24  # 64 MiB per tensor on cuda; the CPU variant uses 1 << 20


class Model(nn.Module):
    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x, y):
        return self.alpha * x + self.beta * y


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return [1.5, -0.75]
"""

AXPBY_NEW = """
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x, y):
        return cuda_extension.axpby(x, y, self.alpha, self.beta)
"""

AXPBY_CU = r"""
#include <cuda_runtime.h>
#include <cstdint>

__global__ void axpby_vec4_kernel(const float4* __restrict__ x, const float4* __restrict__ y,
                                  float4* __restrict__ out, float a, float b, int64_t n4) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 xv = x[i];
    float4 yv = y[i];
    out[i] = make_float4(a * xv.x + b * yv.x, a * xv.y + b * yv.y, a * xv.z + b * yv.z, a * xv.w + b * yv.w);
  }
}

__global__ void axpby_scalar_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                    float* __restrict__ out, float a, float b, int64_t start, int64_t n) {
  int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + b * y[i];
}

void launch_axpby(const float* x, const float* y, float* out, float a, float b, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y) |
                   reinterpret_cast<uintptr_t>(out)) & 15) == 0;
  int64_t n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    int blocks = (int)((n4 + threads - 1) / threads);
    if (blocks > 132 * 16) blocks = 132 * 16;
    axpby_vec4_kernel<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(x),
        reinterpret_cast<const float4*>(y), reinterpret_cast<float4*>(out), a, b, n4);
  }
  int64_t start = n4 * 4;
  if (start < n) {
    int blocks = (int)((n - start + threads - 1) / threads);
    axpby_scalar_kernel<<<blocks, threads, 0, stream>>>(x, y, out, a, b, start, n);
  }
}
"""

AXPBY_BINDING = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "../binding_registry.h"

void launch_axpby(const float* x, const float* y, float* out, float a, float b, int64_t n, cudaStream_t stream);

torch::Tensor axpby_forward(torch::Tensor x, torch::Tensor y, double a, double b) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "axpby: inputs must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && y.scalar_type() == torch::kFloat, "axpby: float32 only");
  TORCH_CHECK(x.sizes() == y.sizes(), "axpby: shapes differ");
  auto xc = x.contiguous();
  auto yc = y.contiguous();
  auto out = torch::empty_like(xc);
  launch_axpby(xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(), (float)a, (float)b,
               xc.numel(), at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

static void register_axpby(pybind11::module& m) { m.def("axpby", &axpby_forward, "alpha * x + beta * y"); }
REGISTER_BINDING(axpby, register_axpby);
"""

# The CPU device builds only .cpp files: the same task as a C++ kernel.
AXPBY_CPP = r"""
#include <torch/csrc/utils/pybind.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <ATen/Parallel.h>
#include "../binding_registry.h"

at::Tensor axpby_forward(const at::Tensor& x, const at::Tensor& y, double a, double b) {
  TORCH_CHECK(x.sizes() == y.sizes(), "axpby: shapes differ");
  auto xc = x.contiguous();
  auto yc = y.contiguous();
  auto out = at::empty_like(xc);
  const float* xp = xc.data_ptr<float>();
  const float* yp = yc.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float fa = (float)a, fb = (float)b;
  at::parallel_for(0, xc.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) op[i] = fa * xp[i] + fb * yp[i];
  });
  return out;
}

static void register_axpby(pybind11::module& m) { m.def("axpby", &axpby_forward); }
REGISTER_BINDING(axpby, register_axpby);
"""

GEMM_REF = '''
import torch
import torch.nn as nn

M, K, N = 1024, 4096, 4096


class Model(nn.Module):
    """Linear, then ReLU, then a scale: a KernelBench level-2-style GEMM with an epilogue."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.relu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N, 0.5]
'''

GEMM_NEW = """
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return cuda_extension.gemm_bias_relu_scale(x, self.linear.weight, self.linear.bias, self.scale)
"""

GEMM_CU = r"""
#include <cuda_runtime.h>
#include <cstdint>

// out[m, n] = max(out[m, n] + bias[n], 0) * scale, four columns per thread.
__global__ void bias_relu_scale_kernel(float4* __restrict__ out, const float4* __restrict__ bias,
                                       int64_t rows, int64_t cols4, float scale) {
  int64_t total = rows * cols4;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    float4 v = out[i];
    float4 b = bias[i % cols4];
    v.x = fmaxf(v.x + b.x, 0.f) * scale;
    v.y = fmaxf(v.y + b.y, 0.f) * scale;
    v.z = fmaxf(v.z + b.z, 0.f) * scale;
    v.w = fmaxf(v.w + b.w, 0.f) * scale;
    out[i] = v;
  }
}

void launch_bias_relu_scale(float* out, const float* bias, int64_t rows, int64_t cols, float scale,
                            cudaStream_t stream) {
  const int threads = 256;
  int64_t total = rows * (cols / 4);
  int blocks = (int)((total + threads - 1) / threads);
  if (blocks > 132 * 16) blocks = 132 * 16;
  bias_relu_scale_kernel<<<blocks, threads, 0, stream>>>(reinterpret_cast<float4*>(out),
      reinterpret_cast<const float4*>(bias), rows, cols / 4, scale);
}
"""

GEMM_BINDING = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>
#include "../binding_registry.h"

void launch_bias_relu_scale(float* out, const float* bias, int64_t rows, int64_t cols, float scale,
                            cudaStream_t stream);

// relu(x @ w^T + bias) * scale: cuBLAS SGEMM (full fp32) then one fused epilogue kernel.
torch::Tensor gemm_bias_relu_scale(torch::Tensor x, torch::Tensor w, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "shape mismatch");
  auto xc = x.contiguous();
  auto wc = w.contiguous();
  auto bc = bias.contiguous();
  const int64_t m = xc.size(0), k = xc.size(1), n = wc.size(0);
  TORCH_CHECK(n % 4 == 0, "out_features must be a multiple of 4");
  auto out = torch::empty({m, n}, xc.options());
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  cublasSetStream(handle, stream);
  const float one = 1.f, zero = 0.f;
  // cuBLAS is column-major: row-major out[m, n] = x w^T is, seen column-major, out^T = op(w) x^T
  // with op = transpose, so w goes first with CUBLAS_OP_T and x second as it is.
  cublasStatus_t status = cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one,
                                      wc.data_ptr<float>(), (int)k, xc.data_ptr<float>(), (int)k, &zero,
                                      out.data_ptr<float>(), (int)n);
  TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed");
  launch_bias_relu_scale(out.data_ptr<float>(), bc.data_ptr<float>(), m, n, (float)scale, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

static void register_gemm(pybind11::module& m) { m.def("gemm_bias_relu_scale", &gemm_bias_relu_scale); }
REGISTER_BINDING(gemm_bias_relu_scale, register_gemm);
"""

TASKS: dict[str, dict] = {
    "axpby": {
        "reference": AXPBY_REF,
        "candidate": AXPBY_NEW,
        "cuda": {"axpby.cu": AXPBY_CU, "axpby_binding.cpp": AXPBY_BINDING},
        "cpu": {"axpby.cpp": AXPBY_CPP},
        "edit": "axpby.cu",
    },
    "gemm_epilogue": {
        "reference": GEMM_REF,
        "candidate": GEMM_NEW,
        "cuda": {"gemm_epilogue.cu": GEMM_CU, "gemm_epilogue_binding.cpp": GEMM_BINDING},
        "cpu": None,
        "edit": "gemm_epilogue.cu",
    },
}


def make_task_workspace(name: str, session_dir: Path, device: str):
    """A fresh session workspace for task `name` with its kernels for `device`."""
    from cuda_agent_cli.workspace import create_workspace

    task = TASKS[name]
    kernels = task[device]
    if kernels is None:
        raise ValueError(f"task {name} has no {device} kernels")
    reference = task["reference"]
    if device == "cpu":
        reference = reference.replace("N = 1 << 24", "N = 1 << 20")
    return create_workspace(session_dir, reference, task["candidate"], kernels)


def touch_kernel(ws, name: str, device: str, round_no: int) -> str:
    """Edit one kernel file the way an agent does (new bytes), so exactly its object rebuilds."""
    task = TASKS[name]
    fname = task["edit"] if device == "cuda" else next(iter(task["cpu"]))
    path = ws.kernels_dir / fname
    path.write_text(path.read_text() + f"\n// round {round_no}\n")
    return fname
