// Torch compute the strict op guard must see or the profiler must give away, from C++: inside an
// op strict allows for copies (threat 37), and with the guard's dispatch key switched off (36).
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cstdint>

#include "../binding_registry.h"

void launch_row_index(int64_t* idx, int64_t n, int64_t cols, cudaStream_t stream);

namespace {

cudaStream_t current() { return c10::cuda::getCurrentCUDAStream(); }
int64_t last_dim(const torch::Tensor& x) { return x.size(-1); }
int64_t leading(const torch::Tensor& x) { return x.numel() / x.size(-1); }

// Threat 37: row sums as a scatter-add inside an op strict allows for copies (index_put).
torch::Tensor row_index(const torch::Tensor& x) {
  auto idx = torch::empty({x.numel()}, x.options().dtype(torch::kLong));
  launch_row_index(idx.data_ptr<int64_t>(), x.numel(), last_dim(x), current());
  return idx;
}

torch::Tensor row_sum_by_unsafe_index_put(torch::Tensor x) {
  c10::List<std::optional<at::Tensor>> indices;
  indices.push_back(row_index(x));
  return at::_unsafe_index_put(torch::zeros({leading(x)}, x.options()), indices, x.reshape({-1}), true);
}

torch::Tensor row_sum_by_index_put_(torch::Tensor x) {
  c10::List<std::optional<at::Tensor>> indices;
  indices.push_back(row_index(x));
  auto out = torch::zeros({leading(x)}, x.options());
  out.index_put_(indices, x.reshape({-1}), /*accumulate=*/true);
  return out;
}

// Threat 36: ATen's relu with the dispatch key the op guard listens on switched off around it,
// beside a kernel of its own, so the extension is seen to do work.
torch::Tensor relu_python_key_excluded(torch::Tensor x) {
  row_index(x);
  c10::impl::ExcludeDispatchKeyGuard off(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  return at::relu(x);
}

// The same, the key switched off in the thread's state by hand and put back after.
torch::Tensor relu_python_key_unset(torch::Tensor x) {
  row_index(x);
  const bool was = c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::Python);
  c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::Python, true);
  c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::PythonTLSSnapshot, true);
  auto out = at::clamp_min(x, 0.0);
  c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::PythonTLSSnapshot, was);
  c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::Python, was);
  return out;
}

void register_guard_tricks(pybind11::module& m) {
  m.def("row_sum_by_unsafe_index_put", &row_sum_by_unsafe_index_put);
  m.def("row_sum_by_index_put_", &row_sum_by_index_put_);
  m.def("relu_python_key_excluded", &relu_python_key_excluded);
  m.def("relu_python_key_unset", &relu_python_key_unset);
}

}  // namespace

REGISTER_BINDING(guard_tricks, register_guard_tricks);
