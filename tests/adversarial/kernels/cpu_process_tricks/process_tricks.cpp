// Kernels that reach past their own call: into the messages the candidate's process exchanges
// with the harness (json hooks installed through a tensor's Python globals), and into other
// processes (a helper process doing the work, perf events on the baselines). None is reported
// by the static checks (pybind11 attribute chains, a process function taken as a pointer); the
// process filter, the stray-process check, the content fingerprint and the null-block bound
// catch them as they run. Kept apart so no other candidate links them.
#include <torch/extension.h>

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

#include "../binding_registry.h"

namespace {

namespace pyb = pybind11;

// A namespace with the builtins, reached from a tensor (no import in the text), in which `code`
// has run. Kept for the life of the process.
pyb::dict& run_python(torch::Tensor x, const char* code) {
  pyb::object builtins = pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__")["__builtins__"];
  auto* space = new pyb::dict();
  (*space)["__builtins__"] = builtins;
  builtins["exec"](code, *space);
  return *space;
}

torch::Tensor plain_relu(torch::Tensor xin) {
  auto x = xin.contiguous();
  auto out = torch::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
  return out;
}

// -- outputs filled in once the harness asks for them ----------------------------------------
// Every call returns zeros at once and keeps its arguments. When the harness asks to see a call
// (the "reveal" request, which names the calls it checks), the real output is computed into the
// returned tensor and three of its zero words are nudged (inside atol) so the output's linear
// sums equal the ones committed for the zeros when the call returned. The hooks are put back
// before the integrity check ("finish").
const char* kFillIn = R"PY(
import json, random
import torch
_loads = json.loads
MASK = (1 << 64) - 1
K = (-7046029254386353131) & MASK
state = {"queue": list(range(6)), "rec": {}}  # installed during the first verify call
LIMIT = 0x3C000000

def ok(v):
    return ((v & 0x7FFFFFFF) <= LIMIT) and (((v >> 32) & 0x7FFFFFFF) <= LIMIT)

def coef(j):
    return ((j * K) & MASK) | 1

def sums(y):
    w = y.reshape(-1).view(torch.int64)
    idx = torch.arange(w.numel(), dtype=torch.int64)
    c = torch.bitwise_or(idx * (-7046029254386353131), 1)
    return int(w.sum()) & MASK, int((w * c).sum()) & MASK

def s64(v):
    return v - (1 << 64) if v >= (1 << 63) else v

def fix(rec):
    x, w, b, out = rec
    with torch.no_grad():
        target = sums(out)
        y = torch.relu(x @ w.t() + b).contiguous()
        s, wt = sums(y)
        dS, dW = (target[0] - s) & MASK, (target[1] - wt) & MASK
        words = y.reshape(-1).view(torch.int64)
        zero = (words == 0).nonzero().reshape(-1).tolist()
        rng = random.Random(12345)
        for attempt in range(200000):
            j1, j2, j3 = rng.sample(zero, 3)
            c1, c2, c3 = coef(j1), coef(j2), coef(j3)
            D = (c2 - c1) & MASK
            if D == 0:
                continue
            t = (D & -D).bit_length() - 1
            v3 = rng.randrange(0, LIMIT) | (rng.randrange(0, LIMIT) << 32)
            A = (dS - v3) & MASK
            B = (dW - c3 * v3) & MASK
            R = (B - c1 * A) & MASK
            if R % (1 << t):
                continue
            mod = 1 << (64 - t)
            v2b = ((R >> t) * pow(D >> t, -1, mod)) % mod
            done = False
            for k in range(1 << t):
                v2 = (v2b + k * mod) & MASK
                v1 = (A - v2) & MASK
                if ok(v1) and ok(v2):
                    done = True
                    break
            if done:
                break
        words[j1], words[j2], words[j3] = s64(v1), s64(v2), s64(v3)
        assert sums(y) == target
        out.copy_(y)

def record(x, w, b, out):
    i = state["queue"].pop(0) if state["queue"] else -1
    state["rec"][i] = (x, w, b, out)

def loads(s, *a, **k):
    m = _loads(s, *a, **k)
    if isinstance(m, dict):
        op = m.get("op")
        if op == "calls" and not m.get("null"):
            state["queue"] = [int(c["id"]) for c in m.get("calls", [])]
        elif op == "drop":
            for i in m.get("ids", []):
                state["rec"].pop(int(i), None)
        elif op == "finish":
            json.loads = _loads
        elif op == "reveal":
            for i in m.get("ids", []):
                r = state["rec"].get(int(i))
                if r is not None:
                    fix(r)
    return m

json.loads = loads
)PY";

torch::Tensor linear_relu_filled_in_later(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  static pyb::dict* space = nullptr;
  if (!space) space = &run_python(x, kFillIn);
  auto out = torch::zeros({x.size(0), w.size(0)}, x.options());
  (*space)["record"](x, w, b, out);
  return out;
}

// -- the work done by a child process --------------------------------------------------------
// Forked on the first call, the child shares memory with this process and computes relu there;
// this process copies the input in, wakes the child over a pipe and sleeps until it answers.
// The child's CPU time is on none of this process's clocks.
const char* kChild = R"PY(
import os, mmap, torch
from torch.utils._python_dispatch import _disable_current_modes
mm = mmap.mmap(-1, 8 * n)
buf = torch.frombuffer(mm, dtype=torch.float32)
xs, ys = buf[:n], buf[n:]
req_r, req_w = os.pipe()
rep_r, rep_w = os.pipe()
if os.fork() == 0:
    while True:
        if not os.read(req_r, 1):
            os._exit(0)
        with _disable_current_modes(), torch.no_grad():
            torch.clamp(xs, min=0, out=ys)
        os.write(rep_w, b"k")
def kick():
    os.write(req_w, b"g")
    os.read(rep_r, 1)
)PY";

torch::Tensor relu_in_a_child(torch::Tensor xin) {
  static pyb::dict* space = nullptr;
  auto x = xin.contiguous();
  if (!space) {
    pyb::object builtins = pyb::cast(x).attr("__class__").attr("__repr__").attr("__globals__")["__builtins__"];
    space = new pyb::dict();
    (*space)["__builtins__"] = builtins;
    (*space)["n"] = x.numel();
    builtins["exec"](kChild, *space);
  }
  pyb::dict& d = *space;
  torch::Tensor xs = d["xs"].cast<torch::Tensor>(), ys = d["ys"].cast<torch::Tensor>();
  std::memcpy(xs.data_ptr<float>(), x.data_ptr<float>(), sizeof(float) * x.numel());
  d["kick"]();
  auto out = torch::empty_like(x);
  std::memcpy(out.data_ptr<float>(), ys.data_ptr<float>(), sizeof(float) * out.numel());
  return out;
}

// -- the work done by a task made with clone(CLONE_VM) ----------------------------------------
// Pure C++: clone taken as a function pointer. The task shares this process's memory but is not
// one of its threads (not in /proc/self/task, not on its CPU-time clock); the caller blocks on
// a pipe meanwhile. A refused clone is reported, so the call fails at once instead of waiting.
struct Job {
  const float* x = nullptr;
  float* o = nullptr;
  int64_t n = 0;
};
Job job;
int req[2], done[2];
alignas(64) char stack_mem[1 << 20];

int worker(void*) {
  char c;
  for (;;) {
    if (read(req[0], &c, 1) != 1) continue;
    for (int64_t i = 0; i < job.n; ++i) job.o[i] = job.x[i] > 0.0f ? job.x[i] : 0.0f;
    c = 1;
    (void)!write(done[1], &c, 1);
  }
  return 0;
}

using MakeTask = int (*)(int (*)(void*), void*, int, void*, ...);

torch::Tensor relu_in_a_cloned_task(torch::Tensor xin) {
  static bool started = false;
  if (!started) {
    TORCH_CHECK(pipe(req) == 0 && pipe(done) == 0, "pipe: ", std::strerror(errno));
    MakeTask make = ::clone;
    const int task = make(&worker, stack_mem + sizeof(stack_mem), CLONE_VM | 17, nullptr);
    TORCH_CHECK(task > 0, "clone(CLONE_VM): ", std::strerror(errno));
    started = true;
  }
  auto x = xin.contiguous();
  auto out = torch::empty_like(x);
  job.x = x.data_ptr<float>();
  job.o = out.data_ptr<float>();
  job.n = x.numel();
  char c = 1;
  (void)!write(req[1], &c, 1);
  (void)!read(done[0], &c, 1);
  return out;
}

// -- perf events on the baselines' threads ---------------------------------------------------
// On the first call, a software cpu-clock perf event with a 10 us sampling period is opened on
// every thread of every other process it can see: the sampling interrupts are charged to the
// sampled threads' CPU time, which is the clock the baselines are timed with, and the events
// live in the kernel, so they fire while this process is stopped for the baseline blocks. When
// no event could be opened it says why.
const char* kSample = R"PY(
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 298, "aarch64": 241}[os.uname().machine]
attr = bytearray(128)
struct.pack_into("IIQQQQQ", attr, 0, 1, 128, 0, 10000, 1, 0, 1 << 1)
buf = ctypes.create_string_buffer(bytes(attr), 128)
me = os.getpid()
fds, err = [], 0
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) == me:
        continue
    try:
        tids = os.listdir(f"/proc/{p}/task")
    except OSError:
        continue
    for t in tids:
        fd = libc.syscall(nr, buf, int(t), -1, -1, 0)
        if fd >= 0:
            fds.append(fd)
        else:
            err = ctypes.get_errno()
if not fds:
    raise OSError(err, "perf_event_open on the other processes: " + os.strerror(err))
)PY";

torch::Tensor relu_sampling_other_processes(torch::Tensor x) {
  static bool installed = false;
  if (!installed) {
    installed = true;
    run_python(x, kSample);
  }
  return plain_relu(x);
}

// -- another process reniced, re-pinned, limited -------------------------------------------------
// The process that started this one (the harness's controller; the baselines' process is reached
// the same way) is given the lowest priority, moved to another core, or has its limits read:
// what a candidate would do to the baselines to make them slower or fail. A refused call raises
// with its name.
const char* kReach = R"PY(
import os, resource
target = os.getppid()
name = ["setpriority", "sched_setaffinity", "prlimit"][HOW]
try:
    if HOW == 0:
        os.setpriority(os.PRIO_PROCESS, target, 19)
    elif HOW == 1:
        os.sched_setaffinity(target, {0})
    else:
        resource.prlimit(target, resource.RLIMIT_NOFILE)
except PermissionError as exc:
    raise PermissionError(exc.errno, name + " on another process: " + exc.strerror)
)PY";

torch::Tensor relu_reaching_another_process(torch::Tensor x, int64_t how) {
  static bool installed = false;
  if (!installed) {
    installed = true;
    std::string code = "HOW = " + std::to_string(how) + "\n" + kReach;
    run_python(x, code.c_str());
  }
  return plain_relu(x);
}

// -- null blocks made slow ---------------------------------------------------------------------
// An honest relu. The request hook burns CPU while the harness's null blocks (its measure of
// this process's own overhead per call) run, so the overhead it would subtract is far larger
// than the real work; the reply hook then divides every claimed time by 1000. Both hooks are
// put back when "finish" arrives, before the integrity check.
const char* kPoison = R"PY(
import json, time
_loads, _dumps = json.loads, json.dumps
st = {"null": False}
BURN_S = 0.002
def loads(s, *a, **k):
    m = _loads(s, *a, **k)
    if isinstance(m, dict):
        op = m.get("op")
        if op == "calls":
            st["null"] = bool(m.get("null"))
            if st["null"]:
                end = time.thread_time() + BURN_S * len(m.get("calls", []))
                while time.thread_time() < end:
                    pass
        elif op == "finish":
            json.loads, json.dumps = _loads, _dumps
    return m
def dumps(m, *a, **k):
    if isinstance(m, dict) and "events_us" in m and not st["null"]:
        m = dict(m)
        m["events_us"] = [t / 1000.0 for t in m["events_us"]]
        m["walls_us"] = [t / 1000.0 for t in m.get("walls_us", [])]
    return _dumps(m, *a, **k)
json.loads, json.dumps = loads, dumps
)PY";

torch::Tensor relu_slowing_null_blocks(torch::Tensor x) {
  static bool installed = false;
  if (!installed) {
    installed = true;
    run_python(x, kPoison);
  }
  return plain_relu(x);
}

// The same trick around a kernel with much work per byte (the loops of cpu_honest's
// tanh_chain), whose time is many times the harness's own work per call: well above what the
// outside clock resolves.
torch::Tensor tanh_chain_slowing_null_blocks(torch::Tensor a, int64_t reps) {
  static bool installed = false;
  if (!installed) {
    installed = true;
    run_python(a, kPoison);
  }
  auto x = a.contiguous();
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

// -- claims that are not numbers ----------------------------------------------------------------
// An honest relu whose reply hook claims NaN (or, every other block, minus a microsecond) for
// every call: NaN compares false with every bound, and a claim below zero makes a ratio infinite.
const char* kNan = R"PY(
import json
_dumps = json.dumps
st = {"n": 0}
def dumps(m, *a, **k):
    if isinstance(m, dict) and "events_us" in m:
        st["n"] += 1
        bad = float("nan") if st["n"] % 2 else -1.0
        m = dict(m)
        m["events_us"] = [bad for _ in m["events_us"]]
        m["walls_us"] = [bad for _ in m.get("walls_us", [])]
    return _dumps(m, *a, **k)
json.dumps = dumps
)PY";

torch::Tensor relu_claiming_nan(torch::Tensor x) {
  static bool installed = false;
  if (!installed) {
    installed = true;
    run_python(x, kNan);
  }
  return plain_relu(x);
}

// The same with its claims as text ("0.0"): a number only once something parses it.
const char* kText = R"PY(
import json
_dumps = json.dumps
def dumps(m, *a, **k):
    if isinstance(m, dict) and "events_us" in m:
        m = dict(m)
        m["events_us"] = ["0.0" for _ in m["events_us"]]
    return _dumps(m, *a, **k)
json.dumps = dumps
)PY";

torch::Tensor relu_claiming_text(torch::Tensor x) {
  static bool installed = false;
  if (!installed) {
    installed = true;
    run_python(x, kText);
  }
  return plain_relu(x);
}

void register_process_tricks(pybind11::module& m) {
  m.def("relu_claiming_nan", &relu_claiming_nan);
  m.def("relu_claiming_text", &relu_claiming_text);
  m.def("tanh_chain_slowing_null_blocks", &tanh_chain_slowing_null_blocks);
  m.def("linear_relu_filled_in_later", &linear_relu_filled_in_later);
  m.def("relu_in_a_child", &relu_in_a_child);
  m.def("relu_in_a_cloned_task", &relu_in_a_cloned_task);
  m.def("relu_sampling_other_processes", &relu_sampling_other_processes);
  m.def("relu_reaching_another_process", &relu_reaching_another_process);
  m.def("relu_slowing_null_blocks", &relu_slowing_null_blocks);
}

}  // namespace

REGISTER_BINDING(process_tricks, register_process_tricks);
