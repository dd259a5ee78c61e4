// An honest relu that leaves a busy process behind: forked twice, in a session of its own, so it
// is no longer in the job's process group. Kept apart so no other candidate links it.
#include <torch/extension.h>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../binding_registry.h"

namespace {

// A process that outlives the job: forked twice, in a session of its own, named so a test can
// look for it, and busy on a core for as long as it lives.
void start_escapee() {
  static bool done = false;
  if (done) return;
  done = true;
  pid_t first = fork();
  if (first == 0) {
    setsid();
    if (fork() == 0) {
      prctl(PR_SET_NAME, "ca-escapee", 0, 0, 0);
      volatile unsigned long spin = 0;
      for (;;) ++spin;
    }
    _exit(0);
  }
  if (first > 0) waitpid(first, nullptr, 0);
}
torch::Tensor relu_leaving_a_process(torch::Tensor x) {
  start_escapee();
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
  return out;
}

void register_escape(pybind11::module& m) { m.def("relu_leaving_a_process", &relu_leaving_a_process); }

}  // namespace

REGISTER_BINDING(escape, register_escape);
