// PooledLayerNorm on the CPU: x is read from memory once. Per token row (in L1 after its first
// sweep): one sweep for the sum and the sum of squares, taken about the row's first element x0
// so a large mean does not cancel the variance away; then, since
//   sum_t (x_t - mean_t) * rstd_t = sum_t rstd_t * (x_t - x0_t) - sum_t (mean_t - x0_t) * rstd_t,
// a second sweep only adds rstd_t * (x_t - x0_t) into a per-batch accumulator (both terms stay
// the size of the row's spread, so neither cancels the other away), and the scalar sum and the
// affine transform are applied once per batch at the end. Both sweeps have an AVX2/FMA version on
// x86-64 (8 floats a step, 4 independent accumulators), picked at run time where the CPU has it,
// and a portable one.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define POOLED_LN_AVX2 1
#endif

#include <algorithm>
#include <cmath>
#include <vector>

#include "../binding_registry.h"

namespace {

// Portable: kLanes independent partial sums, which the compiler vectorizes where it would not a
// single running float sum; the squares in a sweep of their own (one reduction a loop is what it
// vectorizes), about the same shift.
constexpr int64_t kLanes = 16;

float lane_sum(const float* row, int64_t n, float shift, bool squares) {
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

void moments_portable(const float* row, int64_t n, float shift, float* sum_out, float* sq_out) {
  *sum_out = lane_sum(row, n, shift, false);
  *sq_out = lane_sum(row, n, shift, true);
}

void add_scaled_portable(float* acc, const float* row, int64_t n, float scale, float shift) {
  for (int64_t d = 0; d < n; ++d) acc[d] += scale * (row[d] - shift);
}

#ifdef POOLED_LN_AVX2
__attribute__((target("avx2,fma"))) float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

__attribute__((target("avx2,fma")))
void moments_avx2(const float* row, int64_t n, float shift, float* sum_out, float* sq_out) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
  int64_t d = 0;
  for (; d + 16 <= n; d += 16) {
    const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(row + d), sh);
    const __m256 b = _mm256_sub_ps(_mm256_loadu_ps(row + d + 8), sh);
    s0 = _mm256_add_ps(s0, a);
    s1 = _mm256_add_ps(s1, b);
    q0 = _mm256_fmadd_ps(a, a, q0);
    q1 = _mm256_fmadd_ps(b, b, q1);
  }
  float sum = hsum(_mm256_add_ps(s0, s1)), sq = hsum(_mm256_add_ps(q0, q1));
  for (; d < n; ++d) {
    const float v = row[d] - shift;
    sum += v;
    sq += v * v;
  }
  *sum_out = sum;
  *sq_out = sq;
}

__attribute__((target("avx2,fma")))
void add_scaled_avx2(float* acc, const float* row, int64_t n, float scale, float shift) {
  const __m256 k = _mm256_set1_ps(scale), sh = _mm256_set1_ps(shift);
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(k, _mm256_sub_ps(_mm256_loadu_ps(row + d), sh), _mm256_loadu_ps(acc + d)));
  for (; d < n; ++d) acc[d] += scale * (row[d] - shift);
}
#endif

torch::Tensor pooled_layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
  TORCH_CHECK(x.device().is_cpu() && x.dim() == 3, "x must be a CPU tensor [batch, tokens, dim]");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type() && x.scalar_type() == bias.scalar_type() &&
                  x.element_size() == 4 && x.is_floating_point(),
              "x, weight and bias must be float32");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "inputs must be contiguous");
  const int64_t batch = x.size(0), tokens = x.size(1), dim = x.size(2);
  TORCH_CHECK(weight.numel() == dim && bias.numel() == dim, "weight and bias must have dim elements");
  TORCH_CHECK(tokens > 0 && dim > 0, "need at least one token and one feature");

#ifdef POOLED_LN_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const auto moments = avx2 ? moments_avx2 : moments_portable;
  const auto add_scaled = avx2 ? add_scaled_avx2 : add_scaled_portable;
#else
  const auto moments = moments_portable;
  const auto add_scaled = add_scaled_portable;
#endif

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
      float shifted = 0.0f;  // sum_t (mean_t - x_t[0]) * rstd_t
      for (int64_t t = 0; t < tokens; ++t) {
        const float* row = xp + (b * tokens + t) * dim;
        float sum, sq;
        moments(row, dim, row[0], &sum, &sq);
        const float m = sum * inv_dim;  // the mean, less row[0]
        const float var = std::max(sq * inv_dim - m * m, 0.0f);
        const float rstd = 1.0f / std::sqrt(var + static_cast<float>(eps));
        shifted += m * rstd;
        add_scaled(acc.data(), row, dim, rstd, row[0]);
      }
      float* o = op + b * dim;
      for (int64_t d = 0; d < dim; ++d) o[d] = (acc[d] - shifted) * inv_tokens * wp[d] + bp[d];
    }
  });
  return out;
}

void register_pooled_layer_norm(pybind11::module& m) {
  m.def("pooled_layer_norm", &pooled_layer_norm, "LayerNorm over dim, then mean over tokens (CPU)");
}

}  // namespace

REGISTER_BINDING(pooled_layer_norm, register_pooled_layer_norm);
