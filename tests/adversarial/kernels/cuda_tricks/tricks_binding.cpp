// GPU-only cheats that the static checker cannot see: each one is for a runtime defence.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "../binding_registry.h"

void launch_relu(const float* x, float* y, int64_t n, cudaStream_t stream);
void launch_slow_relu(const float* x, float* y, int64_t n, int passes, cudaStream_t stream);
void launch_row_sum(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
void launch_hog(const float* buf, int64_t n_floats, int passes, float* sink, cudaStream_t stream);
void launch_hog_while(const int* flag, const float* buf, int64_t n_floats, float* sink, cudaStream_t stream);

namespace {

namespace pyb = pybind11;
constexpr int kPasses = 64;

// The torch module, reached through a Python function's globals: no import in the text.
pyb::object torch_module(const torch::Tensor& x) {
  return pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__")["torch"];
}

// The honest twin: the slow relu on the current stream.
torch::Tensor slow_relu(torch::Tensor x) {
  auto out = torch::empty_like(x);
  launch_slow_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), kPasses,
                   at::cuda::getCurrentCUDAStream());
  return out;
}

// The same work on a side stream nobody waits for: events on the current stream see ~0.
torch::Tensor slow_relu_side_stream(torch::Tensor x) {
  static pyb::object side = torch_module(x).attr("cuda").attr("Stream")();
  auto handle = reinterpret_cast<cudaStream_t>(side.attr("cuda_stream").cast<intptr_t>());
  auto out = torch::empty_like(x);
  launch_slow_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), kPasses, handle);
  return out;
}

// Launches from a helper thread that outlives the call (spelled through a namespace alias).
namespace conc = std;
struct Launcher {
  conc::mutex mu;
  conc::condition_variable cv;
  const float* src = nullptr;
  float* dst = nullptr;
  int64_t n = 0;
  int device = 0;
  cudaStream_t stream = nullptr;
  bool pending = false;
};
Launcher& launcher() {
  static Launcher* l = [] {
    auto* state = new Launcher();
    conc::thread([state] {
      for (;;) {
        conc::unique_lock<conc::mutex> lock(state->mu);
        state->cv.wait(lock, [state] { return state->pending; });
        cudaSetDevice(state->device);
        launch_slow_relu(state->src, state->dst, state->n, kPasses, state->stream);
        state->pending = false;
        state->cv.notify_all();
      }
    }).detach();
    return state;
  }();
  return *l;
}
torch::Tensor slow_relu_helper_thread(torch::Tensor x) {
  auto out = torch::empty_like(x);
  Launcher& l = launcher();
  conc::unique_lock<conc::mutex> lock(l.mu);
  l.src = x.data_ptr<float>();
  l.dst = out.data_ptr<float>();
  l.n = x.numel();
  l.device = x.get_device();
  l.stream = at::cuda::getCurrentCUDAStream();
  l.pending = true;
  l.cv.notify_all();
  l.cv.wait(lock, [&l] { return !l.pending; });
  return out;
}

// Hopes the caching allocator hands back memory that still holds the reference's output.
torch::Tensor reuse_freed_memory(torch::Tensor x) { return torch::empty_like(x); }

// Makes every timed interval look 100x shorter, on the first call.
torch::Tensor relu_shrinking_events(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    pyb::object event = torch_module(x).attr("cuda").attr("Event");
    pyb::object real = event.attr("elapsed_time");
    event.attr("elapsed_time") = pyb::cpp_function(
        [real](pyb::object self, pyb::object end) { return real(self, end).cast<double>() / 100.0; },
        pyb::is_method(event));
    done = true;
  }
  auto out = torch::empty_like(x);
  launch_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream());
  return out;
}

// The harness's caller object in this process, found among the objects the interpreter tracks:
// its L2 flush is emptied in place on the first call, so every later call starts with the
// inputs still in L2 while the baselines' start cold.
torch::Tensor relu_skipping_the_flush(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    done = true;
    pyb::object builtins = pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__")["__builtins__"];
    for (pyb::handle obj : builtins["__import__"]("gc").attr("get_objects")()) {
      if (pyb::str(pyb::type::of(obj).attr("__name__")).cast<std::string>() == "Caller") {
        obj.attr("flush").attr("resize_")(0);
      }
    }
  }
  auto out = torch::empty_like(x);
  launch_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream());
  return out;
}

// ATen through argument-dependent lookup: no torch:: or at:: in the text.
torch::Tensor linear_relu_adl(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  return relu(addmm(b, x, w.t()));
}

// C++ that reaches Python to rewrite the cached baselines (and plant a new one), so that later
// rounds compare against an eager and torch.compile a thousand times slower.
torch::Tensor relu_forging_baselines(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    done = true;
    pyb::object builtins = pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__")["__builtins__"];
    pyb::object imp = builtins["__import__"];
    pyb::object system = imp("os");
    pyb::object path = system.attr("path");
    pyb::object cache = path.attr("dirname")(system.attr("environ")["TORCHINDUCTOR_CACHE_DIR"]);
    pyb::object folder = path.attr("join")(cache, "baselines");
    system.attr("makedirs")(folder, pyb::arg("exist_ok") = true);
    pyb::list targets = imp("glob").attr("glob")(path.attr("join")(folder, "*.json"));
    targets.append(path.attr("join")(folder, "planted.json"));
    for (pyb::handle target : targets) {
      pyb::object f = builtins["open"](target, "w");
      f.attr("write")("{\"eager_us\": 1e9, \"compile_us\": 1e9, \"method\": \"forged\"}");
      f.attr("close")();
    }
  }
  auto out = torch::empty_like(x);
  launch_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream());
  return out;
}

void noop(torch::Tensor) {}

// The slow relu on a private non-blocking stream, "joined" by waiting on an event recorded on
// that stream before the launch: the wait is satisfied at once, so the current stream's events
// never see the work, and a stream rule that only asks for a join is satisfied.
torch::Tensor slow_relu_fake_join(torch::Tensor x) {
  static cudaStream_t priv = [] {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  static cudaEvent_t before = [] {
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    return e;
  }();
  auto out = torch::empty_like(x);
  cudaEventRecord(before, priv);
  launch_slow_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), kPasses, priv);
  cudaStreamWaitEvent(at::cuda::getCurrentCUDAStream(), before, 0);
  return out;
}

// The id of the call the harness's loop is making, read from its frame's locals (-1: none).
int64_t current_call_id(const torch::Tensor& x) {
  pyb::object builtins = pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__")["__builtins__"];
  pyb::object frame = builtins["__import__"]("sys").attr("_getframe")(0);
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

// Timed calls (ids from 1000) get an output that is never written.
torch::Tensor slow_relu_skipping_timed(torch::Tensor x) {
  if (current_call_id(x) >= 1000) return torch::empty_like(x);
  return slow_relu(x);
}

// Threat 33: wrong on one timed call in five (only the first half of the output written, the
// rest zeros), right on every other call: a few checked calls out of many would miss it.
torch::Tensor slow_relu_half_one_timed_call_in_five(torch::Tensor x) {
  const int64_t id = current_call_id(x);
  if (id < 1000 || id % 5 != 0) return slow_relu(x);
  auto out = torch::empty_like(x);
  const int64_t half = x.numel() / 2;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  launch_slow_relu(x.data_ptr<float>(), out.data_ptr<float>(), half, kPasses, stream);
  cudaMemsetAsync(out.data_ptr<float>() + half, 0, static_cast<size_t>(x.numel() - half) * sizeof(float), stream);
  return out;
}

// The same class: on one timed call in six, a copy of the previous call's output (stale values in
// a buffer of its own, so nothing is shared with an earlier output).
torch::Tensor slow_relu_stale_one_timed_call_in_six(torch::Tensor x) {
  static torch::Tensor last;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t id = current_call_id(x);
  auto out = torch::empty_like(x);
  const size_t bytes = static_cast<size_t>(x.numel()) * sizeof(float);
  if (id >= 1000 && id % 6 == 0 && last.defined() && last.sizes() == x.sizes()) {
    cudaMemcpyAsync(out.data_ptr<float>(), last.data_ptr<float>(), bytes, cudaMemcpyDeviceToDevice, stream);
    return out;
  }
  launch_slow_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), kPasses, stream);
  if (!last.defined() || last.sizes() != x.sizes()) last = torch::empty_like(x);
  cudaMemcpyAsync(last.data_ptr<float>(), out.data_ptr<float>(), bytes, cudaMemcpyDeviceToDevice, stream);
  return out;
}

// Threat 34: right whenever the harness's work separates its calls (hundreds of us on the host
// between two window calls), an output never written when they come back to back (a burst: tens
// of us for this relu): the bursts would then read its calls as short as nothing.
torch::Tensor relu_skip_back_to_back(torch::Tensor x) {
  static auto last = std::chrono::steady_clock::time_point{};
  const bool close = std::chrono::steady_clock::now() - last < std::chrono::microseconds(100);
  auto out = torch::empty_like(x);
  if (!close) launch_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream());
  last = std::chrono::steady_clock::now();
  return out;
}

// While timed: ATen's relu through argument-dependent lookup.
torch::Tensor slow_relu_aten_when_timed(torch::Tensor x) {
  if (current_call_id(x) >= 1000) return relu(x);
  return slow_relu(x);
}

// The process's replies rewritten on their way out (json.dumps, which the channel calls).
torch::Tensor slow_relu_forging_replies(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    done = true;
    pyb::object builtins = pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__")["__builtins__"];
    pyb::object json = builtins["__import__"]("json");
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
  return slow_relu(x);
}

// Private non-blocking streams and events of the tricks below, made once.
cudaStream_t private_stream() {
  static cudaStream_t priv = [] {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  return priv;
}
cudaEvent_t private_event(int which) {
  static cudaEvent_t events[2] = {nullptr, nullptr};
  if (!events[which]) cudaEventCreateWithFlags(&events[which], cudaEventDisableTiming);
  return events[which];
}

// A buffer of 1 GiB (and a sink) on the device for the two tricks below, made once.
constexpr int64_t kHogFloats = int64_t(1) << 28;
float* hog_buffer() {
  static float* buf = [] {
    float* p = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&p), kHogFloats * sizeof(float) + 4096 * sizeof(float));
    cudaMemset(p, 0, kHogFloats * sizeof(float));
    return p;
  }();
  return buf;
}

// Work left on the device past every reply: about 30 ms of reading 1 GiB over and over from
// every SM, queued on a private stream as each reply leaves (os.write, which the channel calls:
// nothing the integrity check watches). The blocks timed next (its own null block, then the
// baselines' null block, eager and torch.compile, while this process is stopped) share the
// device's memory bandwidth and SMs with it.
torch::Tensor slow_relu_leaving_work(torch::Tensor x) {
  static bool done = false;
  if (!done) {
    done = true;
    hog_buffer();
    pyb::object builtins = pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__")["__builtins__"];
    pyb::object os = builtins["__import__"]("os");
    pyb::object write = os.attr("write");
    os.attr("write") = pyb::cpp_function([write](pyb::object fd, pyb::object data) {
      pyb::object written = write(fd, data);
      launch_hog(hog_buffer(), kHogFloats, 100, hog_buffer() + kHogFloats, private_stream());
      return written;
    });
  }
  return slow_relu(x);
}

// The same, without an end: as each reply leaves (os.write), a kernel on every SM starts reading
// the buffer for as long as a flag in host memory is set, and the next request this process
// reads (os.read) clears it. The device is shared for exactly as long as this process waits or
// is stopped: while the baselines are timed.
torch::Tensor slow_relu_busy_while_stopped(torch::Tensor x) {
  static int* flag = nullptr;
  if (flag == nullptr) {
    hog_buffer();
    cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(int), cudaHostAllocMapped);
    *flag = 0;
    int* device_flag = nullptr;
    cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), flag, 0);
    pyb::object builtins = pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__")["__builtins__"];
    pyb::object os = builtins["__import__"]("os");
    pyb::object read = os.attr("read");
    pyb::object write = os.attr("write");
    os.attr("read") = pyb::cpp_function([read](pyb::object fd, pyb::object n) {
      pyb::object data = read(fd, n);
      *flag = 0;
      cudaStreamSynchronize(private_stream());
      return data;
    });
    os.attr("write") = pyb::cpp_function([write, device_flag](pyb::object fd, pyb::object data) {
      pyb::object written = write(fd, data);
      if (*flag == 0) {
        *flag = 1;
        launch_hog_while(device_flag, hog_buffer(), kHogFloats, hog_buffer() + kHogFloats, private_stream());
      }
      return written;
    });
  }
  return slow_relu(x);
}

// Starts at once on a private stream, beside whatever the device is still doing ahead of the
// call, and is joined properly at the end: the current stream's events see only what is left.
torch::Tensor slow_relu_beside_lead_in(torch::Tensor x) {
  auto out = torch::empty_like(x);
  launch_slow_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), kPasses, private_stream());
  cudaEventRecord(private_event(0), private_stream());
  cudaStreamWaitEvent(at::cuda::getCurrentCUDAStream(), private_event(0), 0);
  return out;
}

// Waits for the current stream (the inputs are ready then), runs on a private stream and is
// never joined: the current stream's end event fires before the work is done.
torch::Tensor slow_relu_unjoined(torch::Tensor x) {
  auto out = torch::empty_like(x);
  cudaEventRecord(private_event(1), at::cuda::getCurrentCUDAStream());
  cudaStreamWaitEvent(private_stream(), private_event(1), 0);
  launch_slow_relu(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), kPasses, private_stream());
  return out;
}

// The honest twin of the trick below: a row sum on the current stream.
torch::Tensor row_sum(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.size(1) % 4 == 0, "row_sum: a contiguous 2-D tensor");
  auto out = torch::empty({x.size(0)}, x.options());
  launch_row_sum(x.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1), at::cuda::getCurrentCUDAStream());
  return out;
}

// The same row sum with the next call's inputs kept in L2 across the harness's flush: the L2 is
// set aside for persisting accesses as far as the device allows (once: asking costs a call about
// 100 us, and asking the driver what is set costs as much), and the current stream (the one the
// harness copies and perturbs inputs on) gets an access-policy window over this call's inputs:
// the caching allocator hands the same block to the next call's copy. The harness's writes of the
// next inputs are persisting lines then, and the flush's writes, outside the window, are normal
// ones that cannot evict them: the call reads its inputs from L2 where eager reads them from
// memory.
torch::Tensor row_sum_keeping_inputs_in_l2(torch::Tensor x) {
  static size_t set_aside = 0, widest = 0;
  if (set_aside == 0) {
    int device = 0, most = 0, window = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, device);
    cudaDeviceGetAttribute(&window, cudaDevAttrMaxAccessPolicyWindowSize, device);
    set_aside = static_cast<size_t>(most);
    widest = static_cast<size_t>(window);
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, set_aside);
  }
  const size_t bytes = static_cast<size_t>(x.numel()) * sizeof(float);
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = x.data_ptr();
  attr.accessPolicyWindow.num_bytes = bytes < widest ? bytes : widest;
  const double ratio = static_cast<double>(set_aside) / static_cast<double>(attr.accessPolicyWindow.num_bytes);
  attr.accessPolicyWindow.hitRatio = static_cast<float>(ratio < 1.0 ? ratio : 1.0);
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(at::cuda::getCurrentCUDAStream(), cudaStreamAttributeAccessPolicyWindow, &attr);
  return row_sum(x);
}

void register_tricks(pybind11::module& m) {
  m.def("row_sum", &row_sum);
  m.def("row_sum_keeping_inputs_in_l2", &row_sum_keeping_inputs_in_l2);
  m.def("slow_relu_beside_lead_in", &slow_relu_beside_lead_in);
  m.def("slow_relu_unjoined", &slow_relu_unjoined);
  m.def("slow_relu_leaving_work", &slow_relu_leaving_work);
  m.def("slow_relu_busy_while_stopped", &slow_relu_busy_while_stopped);
  m.def("slow_relu_fake_join", &slow_relu_fake_join);
  m.def("slow_relu_skipping_timed", &slow_relu_skipping_timed);
  m.def("slow_relu_half_one_timed_call_in_five", &slow_relu_half_one_timed_call_in_five);
  m.def("slow_relu_stale_one_timed_call_in_six", &slow_relu_stale_one_timed_call_in_six);
  m.def("relu_skip_back_to_back", &relu_skip_back_to_back);
  m.def("slow_relu_aten_when_timed", &slow_relu_aten_when_timed);
  m.def("slow_relu_forging_replies", &slow_relu_forging_replies);
  m.def("slow_relu", &slow_relu);
  m.def("slow_relu_side_stream", &slow_relu_side_stream);
  m.def("slow_relu_helper_thread", &slow_relu_helper_thread);
  m.def("reuse_freed_memory", &reuse_freed_memory);
  m.def("relu_shrinking_events", &relu_shrinking_events);
  m.def("relu_skipping_the_flush", &relu_skipping_the_flush);
  m.def("linear_relu_adl", &linear_relu_adl);
  m.def("relu_forging_baselines", &relu_forging_baselines);
  m.def("noop", &noop);
}

}  // namespace

REGISTER_BINDING(tricks, register_tricks);
