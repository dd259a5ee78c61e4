// Torch-facing wrapper for relu_scale.cu.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

#include "../binding_registry.h"

void launch_relu_scale(const float* in, float* out, float scale, int64_t n, cudaStream_t stream);

static torch::Tensor relu_scale(torch::Tensor x, double scale) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensors only");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  launch_relu_scale(xc.data_ptr<float>(), out.data_ptr<float>(), static_cast<float>(scale), xc.numel(),
                    c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

static void register_relu_scale(pybind11::module& m) { m.def("relu_scale", &relu_scale); }
REGISTER_BINDING(relu_scale, register_relu_scale);
