// The module's contract (docs/security.md, threats 39-44): honest kernels over inputs in
// containers, structural inputs, masks, module state and weights that change, and the tricks
// that keep one output right while breaking what a user of the module relies on. Plain loops
// over contiguous float32 buffers; every trick is correct on the calls it expects to be checked.
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../binding_registry.h"

namespace {

torch::Tensor f32(const torch::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "expected a CPU tensor");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "expected float32");
  return t.contiguous();
}

torch::Tensor i64(const torch::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kInt64, "expected a CPU int64 tensor");
  return t.contiguous();
}

// ---- honest --------------------------------------------------------------------------------

// out = a @ b, i-k-j order, accumulating in float32 as a blocked GEMM would.
torch::Tensor matmul_plain(torch::Tensor a, torch::Tensor b) {
  auto x = f32(a), y = f32(b);
  TORCH_CHECK(x.dim() == 2 && y.dim() == 2 && x.size(1) == y.size(0), "matmul shapes");
  const int64_t M = x.size(0), K = x.size(1), N = y.size(1);
  auto out = torch::zeros({M, N}, x.options());
  const float* px = x.data_ptr<float>();
  const float* py = y.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const float v = px[m * K + k];
      for (int64_t n = 0; n < N; ++n) po[m * N + n] += v * py[k * N + n];
    }
  return out;
}

// out = x @ w.T + b (nn.Linear's layout).
torch::Tensor linear_plain(torch::Tensor input, torch::Tensor weight, torch::Tensor bias) {
  auto x = f32(input), w = f32(weight), b = f32(bias);
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  TORCH_CHECK(w.size(1) == K && b.numel() == N, "linear shapes");
  auto out = torch::empty({M, N}, x.options());
  const float* px = x.data_ptr<float>();
  const float* pw = w.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += px[m * K + k] * pw[n * K + k];
      po[m * N + n] = acc + pb[n];
    }
  return out;
}

// relu(a) + bias, the bias broadcast along the last dimension.
torch::Tensor relu_add(torch::Tensor a, torch::Tensor bias) {
  auto x = f32(a), b = f32(bias);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  TORCH_CHECK(b.numel() == cols, "bias shape");
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) po[r * cols + c] = std::max(px[r * cols + c], 0.0f) + pb[c];
  return out;
}

// gram = w @ w.T: what a layer computing x @ (w @ w.T) would prepack.
torch::Tensor gram(torch::Tensor weight) {
  auto w = f32(weight);
  const int64_t R = w.size(0), K = w.size(1);
  auto out = torch::empty({R, R}, w.options());
  const float* pw = w.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < R; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += pw[i * K + k] * pw[j * K + k];
      po[i * R + j] = acc;
    }
  return out;
}

// Rows of `values` summed per segment; lengths (int64) add up to the number of rows.
torch::Tensor segment_sum(torch::Tensor values, torch::Tensor lengths) {
  auto v = f32(values), l = i64(lengths);
  const int64_t R = v.size(0), D = v.size(1), S = l.numel();
  const int64_t* pl = l.data_ptr<int64_t>();
  auto out = torch::zeros({S, D}, v.options());
  const float* pv = v.data_ptr<float>();
  float* po = out.data_ptr<float>();
  int64_t row = 0;
  for (int64_t s = 0; s < S; ++s) {
    TORCH_CHECK(pl[s] >= 0 && row + pl[s] <= R, "segment lengths exceed the rows");
    for (int64_t r = 0; r < pl[s]; ++r, ++row)
      for (int64_t d = 0; d < D; ++d) po[s * D + d] += pv[row * D + d];
  }
  TORCH_CHECK(row == R, "segment lengths do not add up to the rows");
  return out;
}

// nn.EmbeddingBag(mode="sum"): bag b sums the rows ids[offsets[b] : offsets[b + 1]].
torch::Tensor bag_sum(torch::Tensor weight, torch::Tensor ids, torch::Tensor offsets) {
  auto w = f32(weight), i = i64(ids), o = i64(offsets);
  const int64_t V = w.size(0), D = w.size(1), N = i.numel(), B = o.numel();
  const int64_t* pi = i.data_ptr<int64_t>();
  const int64_t* po_ = o.data_ptr<int64_t>();
  auto out = torch::zeros({B, D}, w.options());
  const float* pw = w.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t end = b + 1 < B ? po_[b + 1] : N;
    for (int64_t k = po_[b]; k < end; ++k) {
      TORCH_CHECK(pi[k] >= 0 && pi[k] < V, "id out of range");
      for (int64_t d = 0; d < D; ++d) po[b * D + d] += pw[pi[k] * D + d];
    }
  }
  return out;
}

// (x * mask).sum(-1) over every element.
torch::Tensor masked_row_sum(torch::Tensor input, torch::Tensor mask) {
  auto x = f32(input), m = f32(mask);
  TORCH_CHECK(x.sizes() == m.sizes(), "mask shape");
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto out = torch::empty({rows}, x.options());
  const float* px = x.data_ptr<float>();
  const float* pm = m.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += px[r * cols + c] * pm[r * cols + c];
    po[r] = static_cast<float>(acc);
  }
  return out;
}

// The sum of each row (the last dimension).
torch::Tensor row_sum(torch::Tensor input) {
  auto x = f32(input);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto out = torch::empty({rows}, x.options());
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += px[r * cols + c];
    po[r] = static_cast<float>(acc);
  }
  return out;
}

// Softmax over the last dimension.
torch::Tensor softmax_exact(torch::Tensor a) {
  auto x = f32(a);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = px + r * cols;
    float mx = row[0];
    for (int64_t c = 1; c < cols; ++c) mx = std::max(mx, row[c]);
    double denom = 0.0;
    for (int64_t c = 0; c < cols; ++c) denom += std::exp(row[c] - mx);
    for (int64_t c = 0; c < cols; ++c) po[r * cols + c] = static_cast<float>(std::exp(row[c] - mx) / denom);
  }
  return out;
}

// nn.BatchNorm1d in training mode on (B, C): batch statistics for the output, and the running
// statistics and the count of batches updated in place as torch does (momentum, the unbiased
// variance).
torch::Tensor batchnorm_train(torch::Tensor input, torch::Tensor weight, torch::Tensor bias,
                              torch::Tensor running_mean, torch::Tensor running_var, torch::Tensor batches,
                              double momentum, double eps, bool update) {
  auto x = f32(input), w = f32(weight), b = f32(bias);
  TORCH_CHECK(running_mean.is_contiguous() && running_var.is_contiguous(), "running stats layout");
  const int64_t B = x.size(0), C = x.size(1);
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  float* rm = running_mean.data_ptr<float>();
  float* rv = running_var.data_ptr<float>();
  if (update) {
    TORCH_CHECK(batches.scalar_type() == torch::kInt64 && batches.numel() == 1, "num_batches_tracked");
    *batches.data_ptr<int64_t>() += 1;
  }
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < B; ++i) mean += px[i * C + c];
    mean /= B;
    for (int64_t i = 0; i < B; ++i) var += (px[i * C + c] - mean) * (px[i * C + c] - mean);
    const double inv = 1.0 / std::sqrt(var / B + eps);
    for (int64_t i = 0; i < B; ++i)
      po[i * C + c] = static_cast<float>((px[i * C + c] - mean) * inv) * w.data_ptr<float>()[c] + b.data_ptr<float>()[c];
    if (update) {
      rm[c] = static_cast<float>((1.0 - momentum) * rm[c] + momentum * mean);
      rv[c] = static_cast<float>((1.0 - momentum) * rv[c] + momentum * var / (B - 1));
    }
  }
  return out;
}

// ---- tricks: inputs held by address or by pattern ------------------------------------------

// A result cache keyed by the address of the first input: right as long as nobody hands the
// same buffer in with new contents (a dict's tensor that no one clones or redraws).
std::map<const void*, torch::Tensor>& address_cache() {
  static std::map<const void*, torch::Tensor> cache;
  return cache;
}

torch::Tensor matmul_by_address(torch::Tensor a, torch::Tensor b) {
  auto& cache = address_cache();
  auto found = cache.find(a.data_ptr());
  if (found != cache.end() && found->second.size(0) == a.size(0)) return found->second.clone();
  auto out = matmul_plain(a, b);
  cache[a.data_ptr()] = out.clone();
  return out;
}

// A result cache keyed by the exact contents of the integer inputs: right wherever the output
// depends on those and the weights alone, and a hit on every call that sees the same ids again.
std::map<std::string, torch::Tensor>& content_cache() {
  static std::map<std::string, torch::Tensor> cache;
  return cache;
}

std::string key_of(const std::vector<torch::Tensor>& parts, const torch::Tensor& weight) {
  std::string key;
  const void* w = weight.data_ptr();
  key.append(reinterpret_cast<const char*>(&w), sizeof(w));
  for (const auto& t : parts) {
    auto c = t.contiguous();
    key.append(reinterpret_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
    key.push_back('|');
  }
  return key;
}

torch::Tensor bag_sum_replayed(torch::Tensor weight, torch::Tensor ids, torch::Tensor offsets) {
  auto& cache = content_cache();
  const auto key = "bag" + key_of({ids, offsets}, weight);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second.clone();
  auto out = bag_sum(weight, ids, offsets);
  cache[key] = out.clone();
  return out;
}

// Rows of the table summed per segment of `lengths`: the output depends on the lengths and the
// table alone.
torch::Tensor table_segments_replayed(torch::Tensor table, torch::Tensor lengths) {
  auto& cache = content_cache();
  const auto key = "seg" + key_of({lengths}, table);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second.clone();
  auto out = segment_sum(table, lengths);
  cache[key] = out.clone();
  return out;
}

// (x * mask).sum(-1) over the lower triangle only: right while the mask's zeros are where a
// causal mask has them, twice as fast as reading the whole mask.
torch::Tensor masked_row_sum_lower(torch::Tensor input, torch::Tensor mask) {
  auto x = f32(input), m = f32(mask);
  const int64_t n = x.size(-1);
  TORCH_CHECK(x.dim() == 2 && x.size(0) == n, "square input");
  auto out = torch::empty({n}, x.options());
  const float* px = x.data_ptr<float>();
  const float* pm = m.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < n; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c <= r; ++c) acc += px[r * n + c] * pm[r * n + c];
    po[r] = static_cast<float>(acc);
  }
  return out;
}

// The mask's non-zero 8x8 blocks, found on the first call and kept for its shape: every later
// mask of that shape is taken to have its zeros in the same blocks.
torch::Tensor masked_row_sum_blocks(torch::Tensor input, torch::Tensor mask) {
  static std::map<std::vector<int64_t>, std::vector<uint8_t>> patterns;
  auto x = f32(input), m = f32(mask);
  const int64_t cols = x.size(-1), rows = x.numel() / cols, bs = 8;
  TORCH_CHECK(rows % bs == 0 && cols % bs == 0, "8x8 blocks");
  const float* px = x.data_ptr<float>();
  const float* pm = m.data_ptr<float>();
  auto shape = x.sizes().vec();
  auto found = patterns.find(shape);
  if (found == patterns.end()) {
    std::vector<uint8_t> live((rows / bs) * (cols / bs), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        if (pm[r * cols + c] != 0.0f) live[(r / bs) * (cols / bs) + c / bs] = 1;
    found = patterns.emplace(shape, live).first;
  }
  const auto& live = found->second;
  auto out = torch::empty({rows}, x.options());
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t cb = 0; cb < cols / bs; ++cb) {
      if (!live[(r / bs) * (cols / bs) + cb]) continue;
      for (int64_t c = cb * bs; c < (cb + 1) * bs; ++c) acc += px[r * cols + c] * pm[r * cols + c];
    }
    po[r] = static_cast<float>(acc);
  }
  return out;
}

// ---- tricks: module state rewritten in place ----------------------------------------------

// A square matrix transposed where it lies: the layout a kernel would rather read.
void transpose_square_in_place(torch::Tensor t) {
  TORCH_CHECK(t.dim() == 2 && t.size(0) == t.size(1) && t.is_contiguous() && t.scalar_type() == torch::kFloat32,
              "a contiguous square float32 matrix");
  const int64_t n = t.size(0);
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) std::swap(p[i * n + j], p[j * n + i]);
}

// Every element multiplied by `scale` where it lies: a constant folded into a weight.
void scale_in_place(torch::Tensor t, double scale) {
  TORCH_CHECK(t.is_contiguous() && t.scalar_type() == torch::kFloat32, "a contiguous float32 tensor");
  float* p = t.data_ptr<float>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] *= static_cast<float>(scale);
}

// ---- tricks: precision below the module's dtype --------------------------------------------

// float32 rounded to the nearest bfloat16 (8 bits of mantissa), or to float16's 11 bits.
float round_mantissa(float v, int keep_bits) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const int drop = 23 - keep_bits;
  const uint32_t half = 1u << (drop - 1);
  const uint32_t lsb = (bits >> drop) & 1u;
  bits = (bits + half - 1 + lsb) & ~((1u << drop) - 1);
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

torch::Tensor rounded_copy(const torch::Tensor& t, int keep_bits) {
  auto src = f32(t);
  auto out = torch::empty_like(src);
  const float* ps = src.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = src.numel(); i < n; ++i) po[i] = round_mantissa(ps[i], keep_bits);
  return out;
}

// nn.Linear with its weight packed to bfloat16 on every call (a quarter of the bytes to read
// in a real kernel), accumulating in float32.
torch::Tensor linear_bf16_weight(torch::Tensor input, torch::Tensor weight, torch::Tensor bias) {
  return linear_plain(input, rounded_copy(weight, 7), bias);
}

// a @ b with both operands rounded to float16 first, as float16 tensor cores would take them.
torch::Tensor matmul_fp16_operands(torch::Tensor a, torch::Tensor b) {
  return matmul_plain(rounded_copy(a, 10), rounded_copy(b, 10));
}

// exp(x) for x <= 0 from 2^(x log2 e) with a quadratic for the fraction: about 2e-3 off.
float exp_quick(float x) {
  const float t = x * 1.4426950408889634f;
  const float whole = std::floor(t);
  const float f = t - whole;
  const float p = 1.0f + f * (0.6565f + f * 0.3435f);
  return std::ldexp(p, static_cast<int>(whole));
}

torch::Tensor softmax_quick_exp(torch::Tensor a) {
  auto x = f32(a);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = px + r * cols;
    float mx = row[0];
    for (int64_t c = 1; c < cols; ++c) mx = std::max(mx, row[c]);
    float denom = 0.0f;
    for (int64_t c = 0; c < cols; ++c) denom += exp_quick(row[c] - mx);
    for (int64_t c = 0; c < cols; ++c) po[r * cols + c] = exp_quick(row[c] - mx) / denom;
  }
  return out;
}

// ---- tricks: weights cached and never looked at again --------------------------------------

// x @ (w @ w.T) with the gram matrix kept by the weight's address.
torch::Tensor gram_apply_by_address(torch::Tensor input, torch::Tensor weight) {
  static std::map<const void*, torch::Tensor> grams;
  auto found = grams.find(weight.data_ptr());
  if (found == grams.end()) found = grams.emplace(weight.data_ptr(), gram(weight)).first;
  return matmul_plain(input, found->second);
}

void register_contract(pybind11::module& m) {
  m.def("matmul_plain", &matmul_plain);
  m.def("linear_plain", &linear_plain);
  m.def("gram", &gram);
  m.def("relu_add", &relu_add);
  m.def("segment_sum", &segment_sum);
  m.def("bag_sum", &bag_sum);
  m.def("masked_row_sum", &masked_row_sum);
  m.def("softmax_exact", &softmax_exact);
  m.def("row_sum", &row_sum);
  m.def("batchnorm_train", &batchnorm_train);
  m.def("transpose_square_in_place", &transpose_square_in_place);
  m.def("scale_in_place", &scale_in_place);
  m.def("matmul_by_address", &matmul_by_address);
  m.def("bag_sum_replayed", &bag_sum_replayed);
  m.def("table_segments_replayed", &table_segments_replayed);
  m.def("masked_row_sum_lower", &masked_row_sum_lower);
  m.def("masked_row_sum_blocks", &masked_row_sum_blocks);
  m.def("linear_bf16_weight", &linear_bf16_weight);
  m.def("matmul_fp16_operands", &matmul_fp16_operands);
  m.def("softmax_quick_exp", &softmax_quick_exp);
  m.def("gram_apply_by_address", &gram_apply_by_address);
}

}  // namespace

REGISTER_BINDING(contract, register_contract);
