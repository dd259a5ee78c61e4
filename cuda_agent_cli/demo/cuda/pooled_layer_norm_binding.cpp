// Tensor checks, allocation and the stream for the kernel in pooled_layer_norm.cu.
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

#include "../binding_registry.h"

cudaError_t pooled_layer_norm_launch(const float* x, const float* weight, const float* bias, float* out,
                                     int batch, int tokens, int dim, float eps, cudaStream_t stream);

static torch::Tensor pooled_layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "x, weight and bias must be CUDA tensors");
  TORCH_CHECK(x.dim() == 3, "x must be [batch, tokens, dim]");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type() && x.scalar_type() == bias.scalar_type() &&
                  x.element_size() == 4 && x.is_floating_point(),
              "x, weight and bias must be float32");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "inputs must be contiguous");
  TORCH_CHECK(reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 == 0, "x must be 16-byte aligned");
  const int64_t batch = x.size(0), tokens = x.size(1), dim = x.size(2);
  TORCH_CHECK(weight.numel() == dim && bias.numel() == dim, "weight and bias must have dim elements");
  TORCH_CHECK(dim % 128 == 0 && dim >= 128 && dim <= 1024, "dim must be a multiple of 128 up to 1024");
  TORCH_CHECK(tokens > 0 && tokens < (int64_t{1} << 31) && batch > 0 && batch <= 65535,
              "unsupported batch or token count");

  const c10::cuda::CUDAGuard guard(x.device());
  auto out = torch::zeros({batch, dim}, x.options());
  const cudaError_t err = pooled_layer_norm_launch(
      x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(),
      static_cast<int>(batch), static_cast<int>(tokens), static_cast<int>(dim), static_cast<float>(eps),
      c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "pooled_layer_norm kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

static void register_pooled_layer_norm(pybind11::module& m) {
  m.def("pooled_layer_norm", &pooled_layer_norm, "LayerNorm over dim, then mean over tokens (CUDA)");
}
REGISTER_BINDING(pooled_layer_norm, register_pooled_layer_norm);
