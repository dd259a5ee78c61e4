import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor scale_shift_tanh(torch::Tensor x, double scale, double shift) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const float* px = xc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i) po[i] = std::tanh(px[i] * (float)scale + (float)shift);
  return out;
}
"""

ext = load_inline(name="honest_scale_shift_tanh", cpp_sources=cpp_source,
                  functions=["scale_shift_tanh"], extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale_shift_tanh(x, 2.0, -0.5)
