// Library compute reached under the names the linker knows it by (docs/security.md, threat 44):
// nothing in the source says torch:: or BLAS's usual headers, and nothing passes through the
// dispatcher that the op guard watches. What the built library calls gives them away.
#include <torch/extension.h>

#include "../binding_registry.h"

// The Fortran BLAS entry point that the CPU build of torch carries and exports.
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);

// ATen's CPU matmul kernel itself (at::cpu::mm), declared as a C function under its mangled name:
// no namespace the source checks know of, and called directly, it never meets the dispatcher. Its
// Tensor result comes back through a hidden first argument, as the C++ ABI returns such a type.
extern "C" void _ZN2at3cpu2mmERKNS_6TensorES3_(void* result, const void* self, const void* mat2);

namespace {

torch::Tensor f32(const torch::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32, "expected a CPU float32 tensor");
  return t.contiguous();
}

// out = a @ b through BLAS: row-major a @ b is column-major b.T @ a.T.
torch::Tensor matmul_fortran_blas(torch::Tensor a, torch::Tensor b) {
  auto x = f32(a), y = f32(b);
  const int M = static_cast<int>(x.size(0)), K = static_cast<int>(x.size(1)), N = static_cast<int>(y.size(1));
  auto out = torch::empty({M, N}, x.options());
  const float one = 1.0f, zero = 0.0f;
  sgemm_("N", "N", &N, &M, &K, &one, y.data_ptr<float>(), &N, x.data_ptr<float>(), &K, &zero,
         out.data_ptr<float>(), &N);
  return out;
}

torch::Tensor matmul_aten_kernel(torch::Tensor a, torch::Tensor b) {
  auto x = f32(a), y = f32(b);
  alignas(torch::Tensor) unsigned char storage[sizeof(torch::Tensor)];
  _ZN2at3cpu2mmERKNS_6TensorES3_(storage, &x, &y);
  auto* made = reinterpret_cast<torch::Tensor*>(storage);
  torch::Tensor out = std::move(*made);
  made->~Tensor();
  return out;
}

void register_library_names(pybind11::module& m) {
  m.def("matmul_fortran_blas", &matmul_fortran_blas);
  m.def("matmul_aten_kernel", &matmul_aten_kernel);
}

}  // namespace

REGISTER_BINDING(library_names, register_library_names);
