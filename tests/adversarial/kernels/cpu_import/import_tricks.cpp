// An extension that acts when it is imported, before any of its functions is called: a helper
// thread started by a static initializer, and TF32 switched on while the module registers.
// Caught because every snapshot is taken before the extension is imported.
#include <torch/extension.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../binding_registry.h"

namespace {

std::atomic<bool> keep_running{true};

struct StartsAThread {
  StartsAThread() {
    std::thread([] {
      while (keep_running.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }).detach();
  }
};
StartsAThread starts_a_thread;

torch::Tensor relu(torch::Tensor x) {
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
  return out;
}

void register_import_tricks(pybind11::module& m) {
  pybind11::module_::import("torch").attr("backends").attr("cuda").attr("matmul").attr("allow_tf32") = true;
  m.def("relu", &relu);
}

}  // namespace

REGISTER_BINDING(import_tricks, register_import_tricks);
