// relu(x) * scale in one pass over x (the reference reads and writes it twice).
// The lighter torch headers: tensors and pybind11 are all this file needs.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

static torch::Tensor relu_scale(torch::Tensor x, double scale) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const float s = static_cast<float>(scale);
  const int64_t n = xc.numel();
  for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] * s : 0.f;
  return out;
}

static void register_relu_scale(pybind11::module& m) { m.def("relu_scale", &relu_scale); }
REGISTER_BINDING(relu_scale, register_relu_scale);
