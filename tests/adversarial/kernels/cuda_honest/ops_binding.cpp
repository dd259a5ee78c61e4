// Torch-facing wrappers for ops.cu: allocate outputs, pick the current stream, launch.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

#include "../binding_registry.h"

void launch_add_relu(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void launch_row_sum(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream);
void launch_bias_add(float* out, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);

namespace {

void check_cuda_float(const torch::Tensor& t) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
              "expected a contiguous float32 CUDA tensor");
}

torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
  check_cuda_float(a);
  check_cuda_float(b);
  const c10::cuda::CUDAGuard guard(a.device());
  auto out = torch::empty_like(a);
  launch_add_relu(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), a.numel(),
                  at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

torch::Tensor row_sum(torch::Tensor x) {
  check_cuda_float(x);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto out = torch::empty({rows}, x.options());
  launch_row_sum(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols, at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

// y = x @ w^T + b: the GEMM through cuBLAS (allowed under strict), the bias in our own kernel.
torch::Tensor linear_gemm(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  check_cuda_float(x);
  check_cuda_float(w);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  auto out = torch::empty({M, N}, x.options());
  // Row-major out[M,N] = x[M,K] w[N,K]^T is column-major out^T[N,M] = w[N,K] x^T.
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
  TORCH_CHECK(cublasSetStream(handle, at::cuda::getCurrentCUDAStream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  TORCH_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w.data_ptr<float>(), K,
                          x.data_ptr<float>(), K, &beta, out.data_ptr<float>(), N) == CUBLAS_STATUS_SUCCESS,
              "cublasSgemm failed");
  launch_bias_add(out.data_ptr<float>(), b.data_ptr<float>(), M, N, at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

void register_ops(pybind11::module& m) {
  m.def("add_relu", &add_relu);
  m.def("row_sum", &row_sum);
  m.def("linear_gemm", &linear_gemm);
}

}  // namespace

REGISTER_BINDING(ops, register_ops);
