// The module's contract on the GPU: the honest twins, and the tricks that keep one output right
// while breaking what a user relies on (a cache by address, float16 operands, frozen running
// statistics, a gram matrix kept past a weight change; cuBLAS beyond GEMM is
// cuda_library_names').
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <map>

#include "../binding_registry.h"

void launch_matmul(const float* a, const float* b, float* c, int M, int K, int N, bool half, cudaStream_t stream);
void launch_gram(const float* w, float* g, int R, int K, cudaStream_t stream);
void launch_masked_row_sum(const float* x, const float* mask, float* out, int rows, int cols, bool lower,
                           cudaStream_t stream);
void launch_batchnorm(const float* x, const float* w, const float* b, float* running_mean, float* running_var,
                      int64_t* batches, float* y, int B, int C, float momentum, float eps, bool update,
                      cudaStream_t stream);

namespace {

cudaStream_t current() { return c10::cuda::getCurrentCUDAStream(); }

torch::Tensor f32(const torch::Tensor& t) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32, "expected a CUDA float32 tensor");
  return t.contiguous();
}

torch::Tensor matmul_with(torch::Tensor a, torch::Tensor b, bool half) {
  auto x = f32(a), y = f32(b);
  TORCH_CHECK(x.dim() == 2 && y.dim() == 2 && x.size(1) == y.size(0), "matmul shapes");
  auto out = torch::empty({x.size(0), y.size(1)}, x.options());
  launch_matmul(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1), y.size(1),
                half, current());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

torch::Tensor matmul_plain(torch::Tensor a, torch::Tensor b) { return matmul_with(a, b, false); }

torch::Tensor matmul_fp16_operands(torch::Tensor a, torch::Tensor b) { return matmul_with(a, b, true); }

torch::Tensor copy_of(const torch::Tensor& t) {
  auto out = torch::empty_like(t);
  C10_CUDA_CHECK(cudaMemcpyAsync(out.data_ptr(), t.data_ptr(), t.numel() * t.element_size(),
                                 cudaMemcpyDeviceToDevice, current()));
  return out;
}

// The product kept by the address of its first operand: right as long as nobody hands the same
// buffer in with new contents.
torch::Tensor matmul_by_address(torch::Tensor a, torch::Tensor b) {
  static std::map<const void*, torch::Tensor> kept;
  auto found = kept.find(a.data_ptr());
  if (found != kept.end() && found->second.size(0) == a.size(0)) return copy_of(found->second);
  auto out = matmul_plain(a, b);
  kept[a.data_ptr()] = copy_of(out);
  return out;
}

torch::Tensor gram(torch::Tensor weight) {
  auto w = f32(weight);
  auto out = torch::empty({w.size(0), w.size(0)}, w.options());
  launch_gram(w.data_ptr<float>(), out.data_ptr<float>(), w.size(0), w.size(1), current());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

// x @ (w @ w.T) with the gram matrix kept by the weight's address.
torch::Tensor gram_apply_by_address(torch::Tensor input, torch::Tensor weight) {
  static std::map<const void*, torch::Tensor> grams;
  auto found = grams.find(weight.data_ptr());
  if (found == grams.end()) found = grams.emplace(weight.data_ptr(), gram(weight)).first;
  return matmul_plain(input, found->second);
}

torch::Tensor batchnorm_train(torch::Tensor input, torch::Tensor weight, torch::Tensor bias, torch::Tensor running_mean,
                              torch::Tensor running_var, torch::Tensor batches, double momentum, double eps,
                              bool update) {
  auto x = f32(input), w = f32(weight), b = f32(bias);
  TORCH_CHECK(running_mean.is_contiguous() && running_var.is_contiguous() && batches.scalar_type() == torch::kInt64,
              "running statistics");
  auto out = torch::empty_like(x);
  launch_batchnorm(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), running_mean.data_ptr<float>(),
                   running_var.data_ptr<float>(), batches.data_ptr<int64_t>(), out.data_ptr<float>(), x.size(0),
                   x.size(1), static_cast<float>(momentum), static_cast<float>(eps), update, current());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

torch::Tensor masked_row_sum_with(torch::Tensor input, torch::Tensor mask, bool lower) {
  auto x = f32(input), m = f32(mask);
  TORCH_CHECK(x.sizes() == m.sizes() && x.dim() == 2 && (!lower || x.size(0) == x.size(1)), "mask shape");
  auto out = torch::empty({x.size(0)}, x.options());
  launch_masked_row_sum(x.data_ptr<float>(), m.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1), lower,
                        current());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

torch::Tensor masked_row_sum(torch::Tensor x, torch::Tensor mask) { return masked_row_sum_with(x, mask, false); }

torch::Tensor masked_row_sum_lower(torch::Tensor x, torch::Tensor mask) { return masked_row_sum_with(x, mask, true); }

void register_contract(pybind11::module& m) {
  m.def("masked_row_sum", &masked_row_sum);
  m.def("masked_row_sum_lower", &masked_row_sum_lower);
  m.def("matmul_plain", &matmul_plain);
  m.def("matmul_fp16_operands", &matmul_fp16_operands);
  m.def("matmul_by_address", &matmul_by_address);
  m.def("gram", &gram);
  m.def("gram_apply_by_address", &gram_apply_by_address);
  m.def("batchnorm_train", &batchnorm_train);
}

}  // namespace

REGISTER_BINDING(contract, register_contract);
