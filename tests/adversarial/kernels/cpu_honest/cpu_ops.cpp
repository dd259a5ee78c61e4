// Honest CPU kernels: plain loops over contiguous float32 buffers, outputs allocated with
// torch::empty. Every honest candidate in tests/adversarial uses one or more of these.
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "../binding_registry.h"

namespace {

torch::Tensor checked(const torch::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "expected a CPU tensor");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "expected float32");
  return t.contiguous();
}

torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
  auto x = checked(a), y = checked(b);
  TORCH_CHECK(x.sizes() == y.sizes(), "shapes differ");
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  const float* py = y.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = std::max(px[i] + py[i], 0.0f);
  return out;
}

torch::Tensor scale_shift_tanh(torch::Tensor a, double scale, double shift) {
  auto x = checked(a);
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const float s = static_cast<float>(scale), b = static_cast<float>(shift);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = std::tanh(px[i] * s + b);
  return out;
}

torch::Tensor gelu(torch::Tensor a) {
  auto x = checked(a);
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    po[i] = 0.5f * px[i] * (1.0f + std::erf(px[i] * 0.70710678118654752f));
  return out;
}

// Reductions and row-wise ops treat the last dimension as the row.
torch::Tensor row_sum(torch::Tensor a) {
  auto x = checked(a);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto sizes = x.sizes().vec();
  sizes.pop_back();
  auto out = torch::empty(sizes, x.options());
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += px[r * cols + c];
    po[r] = static_cast<float>(acc);
  }
  return out;
}

torch::Tensor row_max(torch::Tensor a) {
  auto x = checked(a);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto sizes = x.sizes().vec();
  sizes.pop_back();
  auto out = torch::empty(sizes, x.options());
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float m = px[r * cols];
    for (int64_t c = 1; c < cols; ++c) m = std::max(m, px[r * cols + c]);
    po[r] = m;
  }
  return out;
}

torch::Tensor softmax_rows(torch::Tensor a) {
  auto x = checked(a);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = px + r * cols;
    float m = row[0];
    for (int64_t c = 1; c < cols; ++c) m = std::max(m, row[c]);
    double denom = 0.0;
    for (int64_t c = 0; c < cols; ++c) denom += std::exp(row[c] - m);
    for (int64_t c = 0; c < cols; ++c) po[r * cols + c] = static_cast<float>(std::exp(row[c] - m) / denom);
  }
  return out;
}

torch::Tensor layernorm_rows(torch::Tensor a, torch::Tensor weight, torch::Tensor bias, double eps) {
  auto x = checked(a), w = checked(weight), b = checked(bias);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  const float* pw = w.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = px + r * cols;
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < cols; ++c) mean += row[c];
    mean /= cols;
    for (int64_t c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
    const double inv = 1.0 / std::sqrt(var / cols + eps);
    for (int64_t c = 0; c < cols; ++c)
      po[r * cols + c] = static_cast<float>((row[c] - mean) * inv) * pw[c] + pb[c];
  }
  return out;
}

// out[m, n] = sum_k a[m, k] * b[k, n], i-k-j order so the inner loop streams rows.
torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
  auto x = checked(a), y = checked(b);
  TORCH_CHECK(x.dim() == 2 && y.dim() == 2 && x.size(1) == y.size(0), "matmul shapes");
  const int64_t M = x.size(0), K = x.size(1), N = y.size(1);
  auto out = torch::zeros({M, N}, x.options());
  const float* px = x.data_ptr<float>();
  const float* py = y.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const float v = px[i * K + k];
      for (int64_t j = 0; j < N; ++j) po[i * N + j] += v * py[k * N + j];
    }
  return out;
}

// y = relu(x @ w^T + bias), the body of nn.Linear followed by ReLU.
torch::Tensor linear_relu(torch::Tensor a, torch::Tensor weight, torch::Tensor bias) {
  auto x = checked(a), w = checked(weight), b = checked(bias);
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  auto out = torch::empty({M, N}, x.options());
  const float* px = x.data_ptr<float>();
  const float* pw = w.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = pb[j];
      for (int64_t k = 0; k < K; ++k) acc += px[i * K + k] * pw[j * K + k];
      po[i * N + j] = std::max(acc, 0.0f);
    }
  return out;
}

// Valid 2D convolution, stride 1, NCHW input, OIHW weight, with bias.
torch::Tensor conv2d(torch::Tensor input, torch::Tensor weight, torch::Tensor bias) {
  auto x = checked(input), w = checked(weight), b = checked(bias);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), KH = w.size(2), KW = w.size(3);
  const int64_t OH = H - KH + 1, OW = W - KW + 1;
  auto out = torch::empty({N, O, OH, OW}, x.options());
  const float* px = x.data_ptr<float>();
  const float* pw = w.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          float acc = pb[o];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t u = 0; u < KH; ++u)
              for (int64_t v = 0; v < KW; ++v)
                acc += px[((n * C + c) * H + i + u) * W + j + v] * pw[((o * C + c) * KH + u) * KW + v];
          po[((n * O + o) * OH + i) * OW + j] = acc;
        }
  return out;
}

torch::Tensor cumsum_rows(torch::Tensor a) {
  auto x = checked(a);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      acc += px[r * cols + c];
      po[r * cols + c] = static_cast<float>(acc);
    }
  }
  return out;
}

// Writes relu(x) into a caller-provided output: the "destination passing" style.
void relu_into(torch::Tensor a, torch::Tensor out) {
  auto x = checked(a);
  TORCH_CHECK(out.is_contiguous() && out.numel() == x.numel(), "out must be contiguous and sized like x");
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
}

// y = tanh applied `reps` times: much work per byte, so a call costs many times the harness's
// own work around it.
torch::Tensor tanh_chain(torch::Tensor a, int64_t reps) {
  auto x = checked(a);
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    float v = px[i];
    for (int64_t r = 0; r < reps; ++r) v = std::tanh(v);
    po[i] = v;
  }
  return out;
}

// relu of x written out `copies` times, one after another: what
// `relu(x).unsqueeze(0).expand(copies, ...).contiguous()` asks for.
torch::Tensor relu_repeated(torch::Tensor x, int64_t copies) {
  auto xc = x.contiguous();
  std::vector<int64_t> shape{copies};
  for (int64_t d : xc.sizes()) shape.push_back(d);
  auto out = torch::empty(shape, xc.options());
  const float* px = xc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t n = xc.numel();
  for (int64_t i = 0; i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
  for (int64_t c = 1; c < copies; ++c) std::memcpy(po + c * n, po, n * sizeof(float));
  return out;
}

// Rows of a table picked by integer ids (an embedding lookup).
torch::Tensor gather_rows(torch::Tensor table, torch::Tensor ids) {
  auto t = checked(table);
  auto idx = ids.contiguous();
  const int64_t n = idx.numel(), dim = t.size(1);
  auto out = torch::empty({n, dim}, t.options());
  const float* pt = t.data_ptr<float>();
  const int64_t* pi = idx.data_ptr<int64_t>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < n; ++r) std::memcpy(po + r * dim, pt + pi[r] * dim, dim * sizeof(float));
  return out;
}

// The share of positive elements of each row.
torch::Tensor fraction_positive(torch::Tensor a) {
  auto x = checked(a);
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto out = torch::empty({rows}, x.options());
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t n = 0;
    for (int64_t c = 0; c < cols; ++c) n += px[r * cols + c] > 0.0f;
    po[r] = static_cast<float>(n) / static_cast<float>(cols);
  }
  return out;
}

// scale * the sum over the last dim.
torch::Tensor row_sum_scaled(torch::Tensor x, double scale) {
  auto xc = x.contiguous();
  const int64_t cols = xc.size(-1), rows = xc.numel() / cols;
  auto out = torch::empty({rows}, xc.options());
  const float* px = xc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += px[r * cols + c];
    po[r] = static_cast<float>(acc * scale);
  }
  return out;
}

void register_cpu_ops(pybind11::module& m) {
  m.def("tanh_chain", &tanh_chain);
  m.def("add_relu", &add_relu);
  m.def("scale_shift_tanh", &scale_shift_tanh);
  m.def("gelu", &gelu);
  m.def("row_sum", &row_sum);
  m.def("row_max", &row_max);
  m.def("softmax_rows", &softmax_rows);
  m.def("layernorm_rows", &layernorm_rows);
  m.def("matmul", &matmul);
  m.def("linear_relu", &linear_relu);
  m.def("conv2d", &conv2d);
  m.def("cumsum_rows", &cumsum_rows);
  m.def("relu_into", &relu_into);
  m.def("relu_repeated", &relu_repeated);
  m.def("gather_rows", &gather_rows);
  m.def("row_sum_scaled", &row_sum_scaled);
  m.def("fraction_positive", &fraction_positive);
}

}  // namespace

REGISTER_BINDING(cpu_ops, register_cpu_ops);
