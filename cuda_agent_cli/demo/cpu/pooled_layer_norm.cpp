// PooledLayerNorm on the CPU: for every token row, mean and variance in two sweeps over the row
// (it is in L1 after the first, and both sweeps vectorize), then the normalized row is added into a per-batch accumulator;
// the affine transform is applied once per batch at the end instead of once per token.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

#include "../binding_registry.h"

// Sum of row[d] (or of (row[d] - shift)^2) in kLanes independent partial sums: the compiler
// vectorizes element-wise accumulation, which it may not do for one running float sum.
constexpr int64_t kLanes = 16;

static float lane_sum(const float* row, int64_t n, float shift, bool squares) {
  float part[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      const float v = row[d + j] - shift;
      part[j] += squares ? v * v : v;
    }
  }
  float total = 0.0f;
  for (; d < n; ++d) {
    const float v = row[d] - shift;
    total += squares ? v * v : v;
  }
  for (int64_t j = 0; j < kLanes; ++j) total += part[j];
  return total;
}

static torch::Tensor pooled_layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
  TORCH_CHECK(x.device().is_cpu() && x.dim() == 3, "x must be a CPU tensor [batch, tokens, dim]");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type() && x.scalar_type() == bias.scalar_type() &&
                  x.element_size() == 4 && x.is_floating_point(),
              "x, weight and bias must be float32");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "inputs must be contiguous");
  const int64_t batch = x.size(0), tokens = x.size(1), dim = x.size(2);
  TORCH_CHECK(weight.numel() == dim && bias.numel() == dim, "weight and bias must have dim elements");
  TORCH_CHECK(tokens > 0, "need at least one token");

  auto out = torch::empty({batch, dim}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float inv_dim = 1.0f / static_cast<float>(dim);
  const float inv_tokens = 1.0f / static_cast<float>(tokens);

  at::parallel_for(0, batch, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> acc(dim);
    for (int64_t b = b0; b < b1; ++b) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t t = 0; t < tokens; ++t) {
        const float* row = xp + (b * tokens + t) * dim;
        const float mean = lane_sum(row, dim, 0.0f, false) * inv_dim;
        const float sq = lane_sum(row, dim, mean, true);
        const float rstd = 1.0f / std::sqrt(sq * inv_dim + static_cast<float>(eps));
        for (int64_t d = 0; d < dim; ++d) acc[d] += (row[d] - mean) * rstd;
      }
      float* o = op + b * dim;
      for (int64_t d = 0; d < dim; ++d) o[d] = acc[d] * inv_tokens * wp[d] + bp[d];
    }
  });
  return out;
}

static void register_pooled_layer_norm(pybind11::module& m) {
  m.def("pooled_layer_norm", &pooled_layer_norm, "LayerNorm over dim, then mean over tokens (CPU)");
}
REGISTER_BINDING(pooled_layer_norm, register_pooled_layer_norm);
