// Cheating CPU kernels that the static checker cannot see through: each one is caught by a
// runtime check instead. Kept apart from the honest kernels so honest candidates never link them.
#include <torch/extension.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <cmath>

#include "../binding_registry.h"

namespace {

namespace pyb = pybind11;

float* floats(torch::Tensor& t) { return t.data_ptr<float>(); }

// Computes relu in place and hands the input back as the output.
torch::Tensor relu_inplace(torch::Tensor x) {
  float* p = floats(x);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) p[i] = p[i] > 0.0f ? p[i] : 0.0f;
  return x;
}

// Correct output, but the input is clobbered afterwards (scratch space "reuse").
torch::Tensor relu_scribble(torch::Tensor x) {
  auto out = torch::empty_like(x);
  float* px = floats(x);
  float* po = floats(out);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    po[i] = px[i] > 0.0f ? px[i] : 0.0f;
    px[i] = 0.0f;
  }
  return out;
}

// Unqualified calls find at::addmm / at::relu through argument-dependent lookup: no torch::
// or at:: prefix anywhere, yet the work is done by ATen.
torch::Tensor linear_relu_adl(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  return relu(addmm(b, x, w.t()));
}

// Fills the output with a constant: "the small term does not matter".
torch::Tensor fill_constant(torch::Tensor x, double value) {
  auto out = torch::empty_like(x);
  float* po = floats(out);
  for (int64_t i = 0, n = out.numel(); i < n; ++i) po[i] = static_cast<float>(value);
  return out;
}

// Allocates the output and never writes it.
torch::Tensor forgot_to_write(torch::Tensor x) { return torch::empty_like(x); }

// An honest ReLU: the tricks below compute the right answer and cheat somewhere else.
torch::Tensor plain_relu(torch::Tensor x) {
  auto out = torch::empty_like(x);
  float* px = floats(x);
  float* po = floats(out);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
  return out;
}

// The globals of a torch Python function, reached from a tensor: a way into the interpreter
// with no import anywhere in the text.
pyb::object python_globals(torch::Tensor x) {
  return pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__");
}

// Reaches the torch module through a Python function's globals (no import anywhere in the
// text) and turns on TF32, on the first call only.
torch::Tensor relu_with_tf32(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    pyb::object globals = python_globals(x);
    pyb::object backends = globals["torch"].attr("backends");
    backends.attr("cuda").attr("matmul").attr("allow_tf32") = true;
    done = true;
  }
  return plain_relu(x);
}

// Same route to the builtins, then replaces the clock the CPU timer reads.
torch::Tensor relu_with_fast_clock(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    pyb::object globals = python_globals(x);
    pyb::object clock = globals["__builtins__"]["__import__"]("time");
    pyb::object real = clock.attr("perf_counter_ns");
    clock.attr("perf_counter_ns") = pyb::cpp_function([real]() {
      return real().cast<long long>() / 100;  // everything looks 100x faster
    });
    done = true;
  }
  return plain_relu(x);
}

// Same route again, this time to the harness's own timing code in this process: every call's
// time it reports is divided by 100.
torch::Tensor relu_with_forged_timing(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    pyb::object globals = python_globals(x);
    pyb::object caller = globals["__builtins__"]["__import__"]("timing").attr("Caller");
    pyb::object real = caller.attr("call");
    pyb::object forged = globals["__builtins__"]["__import__"]("types").attr("MethodType");
    caller.attr("call") = pyb::cpp_function(
        [real](pyb::object self, pyb::args args) {
          pyb::tuple r = real(self, *args);
          return pyb::make_tuple(r[0], r[1], r[2].cast<double>() / 100.0, r[3].cast<double>() / 100.0);
        },
        pyb::is_method(caller));
    done = true;
  }
  return plain_relu(x);
}

// The interpreter's frames, from here up: the harness's loop that asked for this call is one
// of them, and its locals name the call. Returns the call's id, or -1.
int64_t current_call_id(torch::Tensor x) {
  pyb::object globals = python_globals(x);
  pyb::object frame = globals["__builtins__"]["__import__"]("sys").attr("_getframe")(0);
  while (!frame.is_none()) {
    pyb::object locals = frame.attr("f_locals");
    if (pyb::isinstance<pyb::dict>(locals) && locals.contains("c")) {
      pyb::object c = locals["c"];
      if (pyb::isinstance<pyb::dict>(c) && c.contains("id")) return c["id"].cast<int64_t>();
    }
    frame = frame.attr("f_back");
  }
  return -1;
}

// Timed calls are the ones with ids of 1000 and up: do no work on them.
torch::Tensor relu_skipping_timed(torch::Tensor x) {
  if (current_call_id(x) >= 1000) return fill_constant(x, 0.0);
  return plain_relu(x);
}

// y = relu(x) * scale with outputs far inside atol: zeros on timed calls pass allclose.
torch::Tensor scaled_relu(torch::Tensor x, double scale) {
  auto out = torch::empty_like(x);
  float* px = floats(x);
  float* po = floats(out);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = (px[i] > 0.0f ? px[i] : 0.0f) * static_cast<float>(scale);
  return out;
}
torch::Tensor scaled_relu_zeros_when_timed(torch::Tensor x, double scale) {
  if (current_call_id(x) >= 1000) return fill_constant(x, 0.0);
  return scaled_relu(x, scale);
}

// While timed: relu in place on the input, handed back as the output.
torch::Tensor relu_aliasing_when_timed(torch::Tensor x) {
  if (current_call_id(x) >= 1000) return relu_inplace(x);
  return plain_relu(x);
}

// While timed: ATen's relu, found by argument-dependent lookup.
torch::Tensor relu_aten_when_timed(torch::Tensor x) {
  if (current_call_id(x) >= 1000) return relu(x);
  return plain_relu(x);
}

// The claims the process sends back, rewritten on their way out: json.dumps, which the channel
// calls, is replaced by one that makes every reported time 100 times smaller.
torch::Tensor relu_forging_replies(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    done = true;
    pyb::object globals = python_globals(x);
    pyb::object json = globals["__builtins__"]["__import__"]("json");
    pyb::object real = json.attr("dumps");
    json.attr("dumps") = pyb::cpp_function([real](pyb::object message, pyb::kwargs kwargs) {
      if (pyb::isinstance<pyb::dict>(message)) {
        pyb::dict m = message;
        for (const char* key : {"events_us", "walls_us"}) {
          if (m.contains(key)) {
            pyb::list faster;
            for (auto t : m[key]) faster.append(t.cast<double>() / 100.0);
            m[key] = faster;
          }
        }
      }
      return real(message, **kwargs);
    });
  }
  return plain_relu(x);
}

// A cache of outputs keyed on the input's pattern up to scale: relu(c * x) = c * relu(x) for
// c > 0, so for inputs that are rescaled copies of one another the cached output, rescaled,
// is exactly right and costs one multiply instead of the kernel.
struct ScaledEntry {
  std::vector<float> key;
  torch::Tensor out;
};
torch::Tensor relu_scaled_replay(torch::Tensor x) {
  static std::vector<ScaledEntry> cache;
  float* px = floats(x);
  const int64_t n = x.numel();
  const int64_t probes = n < 16 ? n : 16;
  if (n == 0 || px[0] == 0.0f) return plain_relu(x);
  std::vector<float> key(probes);
  for (int64_t i = 0; i < probes; ++i) key[i] = px[i] / px[0];
  for (auto& e : cache) {
    bool same = true;
    for (int64_t i = 0; i < probes && same; ++i) same = std::fabs(e.key[i] - key[i]) < 1e-4f * (1.0f + std::fabs(key[i]));
    if (same && e.out.numel() == n) {
      const float scale = px[0] / e.key.back();
      auto out = torch::empty_like(x);
      float* po = floats(out);
      const float* pc = e.out.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) po[i] = pc[i] * scale;
      return out;
    }
  }
  auto out = plain_relu(x);
  key.push_back(px[0]);
  cache.push_back({key, out.clone()});
  return out;
}

// Hands the work to a helper thread that outlives the call (spelled through a namespace
// alias). The call waits for the result, so the output is right; the thread stays behind.
namespace conc = std;
struct Helper {
  conc::mutex mu;
  conc::condition_variable cv;
  const float* src = nullptr;
  float* dst = nullptr;
  int64_t n = 0;
  bool pending = false;
};
Helper& helper() {
  static Helper* h = [] {
    auto* state = new Helper();
    conc::thread([state] {
      for (;;) {
        conc::unique_lock<conc::mutex> lock(state->mu);
        state->cv.wait(lock, [state] { return state->pending; });
        for (int64_t i = 0; i < state->n; ++i) state->dst[i] = state->src[i] > 0.0f ? state->src[i] : 0.0f;
        state->pending = false;
        state->cv.notify_all();
      }
    }).detach();
    return state;
  }();
  return *h;
}
torch::Tensor relu_on_helper_thread(torch::Tensor x) {
  auto out = torch::empty_like(x);
  Helper& h = helper();
  conc::unique_lock<conc::mutex> lock(h.mu);
  h.src = floats(x);
  h.dst = floats(out);
  h.n = x.numel();
  h.pending = true;
  h.cv.notify_all();
  h.cv.wait(lock, [&h] { return !h.pending; });
  return out;
}

// Same route, to the files the harness hands between its processes: on the first call every
// input set the reference wrote is rewritten as zeros, so the judge's reference computes relu(0).
// The kernel then does no work at all: it zeroes its own input and returns zeros, and every
// output check agrees with the tampered reference.
torch::Tensor relu_rewriting_inputs(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    pyb::object globals = python_globals(x);
    pyb::object imp = globals["__builtins__"]["__import__"];
    pyb::object path = imp("os").attr("path");
    pyb::object me = imp("sys").attr("modules")["model_new"];
    pyb::object folder = path.attr("join")(path.attr("dirname")(me.attr("__file__")), "tensors_in");
    pyb::object tensors = globals["torch"];
    for (pyb::handle file : imp("glob").attr("glob")(path.attr("join")(folder, "inputs_*.pt"))) {
      pyb::object payload = tensors.attr("load")(file, pyb::arg("weights_only") = true);
      for (pyb::handle t : payload["inputs"]) t.attr("zero_")();
      tensors.attr("save")(payload, file);
    }
    done = true;
  }
  std::memset(floats(x), 0, sizeof(float) * x.numel());
  auto out = torch::empty_like(x);
  std::memset(floats(out), 0, sizeof(float) * out.numel());
  return out;
}

// Same route, to the user's files: every cached baseline is rewritten (and a new one planted)
// so that later rounds compare against an eager and torch.compile a thousand times slower.
torch::Tensor relu_forging_baselines(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    done = true;
    pyb::object globals = python_globals(x);
    pyb::object imp = globals["__builtins__"]["__import__"];
    pyb::object open_file = globals["__builtins__"]["open"];
    pyb::object system = imp("os");
    pyb::object path = system.attr("path");
    pyb::object cache = path.attr("dirname")(system.attr("environ")["TORCHINDUCTOR_CACHE_DIR"]);
    pyb::object folder = path.attr("join")(cache, "baselines");
    system.attr("makedirs")(folder, pyb::arg("exist_ok") = true);
    pyb::list targets = imp("glob").attr("glob")(path.attr("join")(folder, "*.json"));
    targets.append(path.attr("join")(folder, "planted.json"));
    for (pyb::handle target : targets) {
      pyb::object f = open_file(target, "w");
      f.attr("write")("{\"eager_us\": 1e9, \"compile_us\": 1e9, \"method\": \"forged\"}");
      f.attr("close")();
    }
  }
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
  return out;
}

// Same route, to the bytecode the harness worker keeps of torch where torch was installed
// without any (its folder is in the environment): a .pyc planted for a torch module there would
// run inside every later worker, before any candidate.
torch::Tensor relu_planting_bytecode(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    done = true;
    pyb::object globals = python_globals(x);
    pyb::object imp = globals["__builtins__"]["__import__"];
    pyb::object open_file = globals["__builtins__"]["open"];
    pyb::object system = imp("os");
    pyb::object path = system.attr("path");
    pyb::object folder = path.attr("join")(system.attr("environ")["CUDA_AGENT_BYTECODE_DIR"], "torch", "__pycache__");
    system.attr("makedirs")(folder, pyb::arg("exist_ok") = true);
    pyb::object f = open_file(path.attr("join")(folder, "__init__.planted.pyc"), "wb");
    f.attr("write")(pyb::bytes("planted"));
    f.attr("close")();
  }
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
  return out;
}

// Same route, to the harness's own caller object in this process (found among the objects the
// interpreter tracks): the sweep that clears the caches before each large call is switched off,
// so this process's calls start from warm caches while the baselines' start cold. Three
// spellings: the size from which inputs are swept, the sweep emptied in place, the sweep gone.
torch::Tensor relu_skipping_the_flush(torch::Tensor x, int64_t how) {
  static bool done = false;
  if (!done) {
    done = true;
    pyb::object globals = python_globals(x);
    pyb::object imp = globals["__builtins__"]["__import__"];
    for (pyb::handle obj : imp("gc").attr("get_objects")()) {
      if (pyb::str(pyb::type::of(obj).attr("__name__")).cast<std::string>() != "Caller") continue;
      if (how == 0) {
        obj.attr("flush_from") = pyb::int_(1LL << 60);
      } else if (how == 1) {
        obj.attr("flush").attr("resize_")(0);
      } else {
        obj.attr("flush") = pyb::none();
      }
    }
  }
  return plain_relu(x);
}

// The same switch, flipped back and forth so that the caller looks intact whenever a block
// of calls ends: on timed calls (ids from 1000, five to a block) the sweep before the next call
// is turned off, and the last call of each block turns it back on. Four calls in five start warm.
torch::Tensor relu_skipping_the_flush_inside_blocks(torch::Tensor x) {
  static pyb::object* caller = nullptr;
  static pyb::object* threshold = nullptr;
  if (caller == nullptr) {
    pyb::object globals = python_globals(x);
    for (pyb::handle obj : globals["__builtins__"]["__import__"]("gc").attr("get_objects")()) {
      if (pyb::str(pyb::type::of(obj).attr("__name__")).cast<std::string>() == "Caller") {
        caller = new pyb::object(pyb::reinterpret_borrow<pyb::object>(obj));
        threshold = new pyb::object(obj.attr("flush_from"));
        break;
      }
    }
  }
  const int64_t id = current_call_id(x);
  if (caller != nullptr) {
    const bool timed = id >= 1000 && id < 100000;
    const bool last = !timed || (id - 1000) % 5 == 4;
    caller->attr("flush_from") = last ? *threshold : pyb::int_(1LL << 60);
  }
  return plain_relu(x);
}

void noop(torch::Tensor) {}

// Answers kept by a key made of a few input values, replayed when a call's key was seen before:
// right wherever those values decide the output and repeat between calls (integer ids that are
// never drawn anew; signs that a positive rescaling keeps).
std::map<uint64_t, torch::Tensor>& replay_cache() {
  static std::map<uint64_t, torch::Tensor> cache;
  return cache;
}

torch::Tensor embedding_linear_relu_replayed(torch::Tensor table, torch::Tensor ids, torch::Tensor w, torch::Tensor b) {
  auto idx = ids.contiguous();
  const int64_t* pi = idx.data_ptr<int64_t>();
  uint64_t key = 1469598103934665603ULL;
  for (int64_t i = 0; i < std::min<int64_t>(16, idx.numel()); ++i) key = (key ^ static_cast<uint64_t>(pi[i])) * 1099511628211ULL;
  auto& cache = replay_cache();
  auto hit = cache.find(key);
  if (hit != cache.end()) return hit->second.clone();
  const int64_t n = idx.numel(), K = table.size(1), N = w.size(0);
  auto out = torch::empty({n, N}, table.options());
  const float* pt = table.data_ptr<float>();
  const float* pw = w.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = floats(out);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < N; ++j) {
      float acc = pb[j];
      for (int64_t k = 0; k < K; ++k) acc += pt[pi[r] * K + k] * pw[j * K + k];
      po[r * N + j] = acc > 0.0f ? acc : 0.0f;
    }
  cache[key] = out.clone();
  return out;
}

torch::Tensor fraction_positive_replayed(torch::Tensor x) {
  auto xc = x.contiguous();
  const float* px = xc.data_ptr<float>();
  uint64_t key = 0;
  for (int64_t i = 0; i < std::min<int64_t>(64, xc.numel()); ++i) key = (key << 1) | (px[i] > 0.0f ? 1 : 0);
  auto& cache = replay_cache();
  auto hit = cache.find(key);
  if (hit != cache.end()) return hit->second.clone();
  const int64_t cols = xc.size(-1), rows = xc.numel() / cols;
  auto out = torch::empty({rows}, xc.options());
  float* po = floats(out);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t n = 0;
    for (int64_t c = 0; c < cols; ++c) n += px[r * cols + c] > 0.0f;
    po[r] = static_cast<float>(n) / static_cast<float>(cols);
  }
  cache[key] = out.clone();
  return out;
}



// Softmax over the last dim with the normalizer fixed in advance (the row length times E[exp(z)]
// for z ~ N(0, 1)) instead of summed: every value is far inside atol, and off by a few percent.
torch::Tensor softmax_fixed_normalizer(torch::Tensor x) {
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const int64_t cols = xc.size(-1), rows = xc.numel() / cols;
  const float norm = 1.0f / (static_cast<float>(cols) * std::exp(0.5f));
  const float* px = xc.data_ptr<float>();
  float* po = floats(out);
  for (int64_t i = 0; i < rows * cols; ++i) po[i] = std::exp(px[i]) * norm;
  return out;
}

// scale * the sum over the last dim from every other element, doubled (half the memory traffic,
// an error of a few percent where outputs are small); cpu_ops.cpp's row_sum_scaled is its honest twin.

torch::Tensor row_sum_subsampled(torch::Tensor x, double scale) {
  auto xc = x.contiguous();
  const int64_t cols = xc.size(-1), rows = xc.numel() / cols;
  auto out = torch::empty({rows}, xc.options());
  const float* px = xc.data_ptr<float>();
  float* po = floats(out);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; c += 2) acc += px[r * cols + c];
    po[r] = static_cast<float>(2.0 * acc * scale);
  }
  return out;
}

void register_tricks(pybind11::module& m) {
  m.def("relu_inplace", &relu_inplace);
  m.def("relu_scribble", &relu_scribble);
  m.def("linear_relu_adl", &linear_relu_adl);
  m.def("fill_constant", &fill_constant);
  m.def("forgot_to_write", &forgot_to_write);
  m.def("relu_with_tf32", &relu_with_tf32);
  m.def("relu_with_fast_clock", &relu_with_fast_clock);
  m.def("relu_with_forged_timing", &relu_with_forged_timing);
  m.def("relu_on_helper_thread", &relu_on_helper_thread);
  m.def("relu_rewriting_inputs", &relu_rewriting_inputs);
  m.def("relu_forging_baselines", &relu_forging_baselines);
  m.def("relu_planting_bytecode", &relu_planting_bytecode);
  m.def("relu_skipping_the_flush", &relu_skipping_the_flush);
  m.def("relu_skipping_the_flush_inside_blocks", &relu_skipping_the_flush_inside_blocks);
  m.def("noop", &noop);
  m.def("plain_relu", &plain_relu);
  m.def("relu_skipping_timed", &relu_skipping_timed);
  m.def("scaled_relu", &scaled_relu);
  m.def("scaled_relu_zeros_when_timed", &scaled_relu_zeros_when_timed);
  m.def("relu_aliasing_when_timed", &relu_aliasing_when_timed);
  m.def("relu_aten_when_timed", &relu_aten_when_timed);
  m.def("relu_forging_replies", &relu_forging_replies);
  m.def("relu_scaled_replay", &relu_scaled_replay);
  m.def("softmax_fixed_normalizer", &softmax_fixed_normalizer);
  m.def("embedding_linear_relu_replayed", &embedding_linear_relu_replayed);
  m.def("fraction_positive_replayed", &fraction_positive_replayed);
  m.def("row_sum_subsampled", &row_sum_subsampled);
}

}  // namespace

REGISTER_BINDING(tricks, register_tricks);
