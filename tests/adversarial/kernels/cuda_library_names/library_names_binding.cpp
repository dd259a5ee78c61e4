// cuBLAS beyond GEMM on the GPU (docs/security.md, threat 44): a matrix add through cuBLAS's geam,
// reached through a pointer to the function, so no call of it by name appears in the source. What
// the built library calls gives it away.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>
#include <cublas_v2.h>

#include "../binding_registry.h"

namespace {

cudaStream_t current() { return c10::cuda::getCurrentCUDAStream(); }

torch::Tensor f32(const torch::Tensor& t) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32, "expected a CUDA float32 tensor");
  return t.contiguous();
}

// a + b through cuBLAS's matrix add (geam).
torch::Tensor add_through_geam(torch::Tensor a, torch::Tensor b) {
  auto x = f32(a), y = f32(b);
  TORCH_CHECK(x.sizes() == y.sizes() && x.dim() == 2, "add shapes");
  auto out = torch::empty_like(x);
  const float one = 1.0f;
  const int rows = x.size(0), cols = x.size(1);
  auto handle = at::cuda::getCurrentCUDABlasHandle();
  TORCH_CHECK(cublasSetStream(handle, current()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
  auto geam = &cublasSgeam;
  const auto status = geam(handle, CUBLAS_OP_N, CUBLAS_OP_N, cols, rows, &one, x.data_ptr<float>(), cols, &one,
                           y.data_ptr<float>(), cols, out.data_ptr<float>(), cols);
  TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "geam");
  return out;
}

void register_library_names(pybind11::module& m) { m.def("add_through_geam", &add_through_geam); }

}  // namespace

REGISTER_BINDING(library_names, register_library_names);
