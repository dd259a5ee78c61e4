// The judge's threats 30-35 on the GPU: honest twins, and tricks that replay answers by a key of
// a few input values, approximate inside atol, or hand layout work to the judge. None of them reaches the harness; each is for a check of what it returns.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "../binding_registry.h"

void launch_fraction_positive(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
void launch_gather_linear_relu(const float* table, const int64_t* ids, const float* w, const float* b, float* out,
                               int64_t n, int64_t k_dim, int64_t n_out, cudaStream_t stream);
void launch_softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
void launch_exp_scaled(const float* x, float* y, int64_t n, float scale, cudaStream_t stream);
void launch_row_sum_strided(const float* x, float* y, int64_t rows, int64_t cols, int step, float scale,
                            cudaStream_t stream);
void launch_relu_repeated(const float* x, float* y, int64_t n, int copies, cudaStream_t stream);
void launch_relu(const float* x, float* y, int64_t n, cudaStream_t stream);

namespace {

cudaStream_t current() { return c10::cuda::getCurrentCUDAStream(); }

int64_t last_dim(const torch::Tensor& x) { return x.size(-1); }
int64_t leading(const torch::Tensor& x) { return x.numel() / x.size(-1); }

// Answers kept by key, handed back as a device-to-device copy (no torch op runs on a hit).
std::unordered_map<uint64_t, torch::Tensor>& replay_cache() {
  static std::unordered_map<uint64_t, torch::Tensor> cache;
  return cache;
}

torch::Tensor copy_of(const torch::Tensor& t) {
  auto out = torch::empty_like(t);
  cudaMemcpyAsync(out.data_ptr(), t.data_ptr(), t.numel() * t.element_size(), cudaMemcpyDeviceToDevice, current());
  return out;
}

// The first `n` elements of a device tensor, on the host.
template <typename T>
std::vector<T> head(const torch::Tensor& t, int64_t n) {
  std::vector<T> host(static_cast<size_t>(std::min<int64_t>(n, t.numel())));
  cudaMemcpyAsync(host.data(), t.data_ptr(), host.size() * sizeof(T), cudaMemcpyDeviceToHost, current());
  cudaStreamSynchronize(current());
  return host;
}

torch::Tensor fraction_positive(torch::Tensor x) {
  auto out = torch::empty({leading(x)}, x.options());
  launch_fraction_positive(x.data_ptr<float>(), out.data_ptr<float>(), leading(x), last_dim(x), current());
  return out;
}

// Threat 31: the answer of the first call whose first 64 signs it saw before.
torch::Tensor fraction_positive_replayed(torch::Tensor x) {
  uint64_t key = 0;
  for (float v : head<float>(x, 64)) key = (key << 1) | (v > 0.0f ? 1u : 0u);
  auto hit = replay_cache().find(key);
  if (hit != replay_cache().end()) return copy_of(hit->second);
  auto out = fraction_positive(x);
  replay_cache()[key] = copy_of(out);
  return out;
}

torch::Tensor embedding_linear_relu(torch::Tensor table, torch::Tensor ids, torch::Tensor w, torch::Tensor b) {
  auto out = torch::empty({ids.numel(), w.size(0)}, table.options());
  launch_gather_linear_relu(table.data_ptr<float>(), ids.data_ptr<int64_t>(), w.data_ptr<float>(),
                            b.data_ptr<float>(), out.data_ptr<float>(), ids.numel(), table.size(1), w.size(0),
                            current());
  return out;
}

// Threat 30: the answer of the first call whose first 16 integer ids it saw before.
torch::Tensor embedding_linear_relu_replayed(torch::Tensor table, torch::Tensor ids, torch::Tensor w,
                                             torch::Tensor b) {
  uint64_t key = 1469598103934665603ULL;
  for (int64_t v : head<int64_t>(ids, 16)) key = (key ^ static_cast<uint64_t>(v)) * 1099511628211ULL;
  auto hit = replay_cache().find(key);
  if (hit != replay_cache().end()) return copy_of(hit->second);
  auto out = embedding_linear_relu(table, ids, w, b);
  replay_cache()[key] = copy_of(out);
  return out;
}

torch::Tensor softmax_rows(torch::Tensor x) {
  auto out = torch::empty_like(x);
  launch_softmax_rows(x.data_ptr<float>(), out.data_ptr<float>(), leading(x), last_dim(x), current());
  return out;
}

// Threat 32: exp(x) over the normalizer inputs like get_inputs()'s have on average (the row
// length times E[exp(z)] for z ~ N(0, 1)), not over the row's sum: far inside atol, a few % off.
torch::Tensor softmax_fixed_normalizer(torch::Tensor x) {
  auto out = torch::empty_like(x);
  const float scale = 1.0f / (static_cast<float>(last_dim(x)) * std::exp(0.5f));
  launch_exp_scaled(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), scale, current());
  return out;
}

torch::Tensor row_sum_scaled(torch::Tensor x, double scale) {
  auto out = torch::empty({leading(x)}, x.options());
  launch_row_sum_strided(x.data_ptr<float>(), out.data_ptr<float>(), leading(x), last_dim(x), 1,
                         static_cast<float>(scale), current());
  return out;
}

// Threat 32: every other element, the sum doubled (half the reads; a few percent off).
torch::Tensor row_sum_subsampled(torch::Tensor x, double scale) {
  auto out = torch::empty({leading(x)}, x.options());
  launch_row_sum_strided(x.data_ptr<float>(), out.data_ptr<float>(), leading(x), last_dim(x), 2,
                         static_cast<float>(2.0 * scale), current());
  return out;
}

torch::Tensor plain_relu(torch::Tensor x) {
  auto out = torch::empty_like(x);
  launch_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), current());
  return out;
}

// The honest twin of threat 35: the copies written by the kernel.
torch::Tensor relu_repeated(torch::Tensor x, int64_t copies) {
  std::vector<int64_t> shape{copies};
  for (auto d : x.sizes()) shape.push_back(d);
  auto out = torch::empty(shape, x.options());
  launch_relu_repeated(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), static_cast<int>(copies), current());
  return out;
}

void register_judged(pybind11::module& m) {
  m.def("fraction_positive", &fraction_positive);
  m.def("fraction_positive_replayed", &fraction_positive_replayed);
  m.def("embedding_linear_relu", &embedding_linear_relu);
  m.def("embedding_linear_relu_replayed", &embedding_linear_relu_replayed);
  m.def("softmax_rows", &softmax_rows);
  m.def("softmax_fixed_normalizer", &softmax_fixed_normalizer);
  m.def("row_sum_scaled", &row_sum_scaled);
  m.def("row_sum_subsampled", &row_sum_subsampled);
  m.def("plain_relu", &plain_relu);
  m.def("relu_repeated", &relu_repeated);
}

}  // namespace

REGISTER_BINDING(judged, register_judged);
