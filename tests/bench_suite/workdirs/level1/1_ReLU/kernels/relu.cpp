// max(x, 0) in one pass. The lighter torch headers: tensors and pybind11 are all it needs.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

static torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = xc.numel();
  for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
  return out;
}

static void register_relu(pybind11::module& m) { m.def("relu_forward", &relu_forward); }
REGISTER_BINDING(relu, register_relu);
