"""Does the way the harness makes its calls change what a kernel's events read? (CUDA only.)

The harness times every call on its own: fresh inputs, a synchronize, the word to go from
another process, the L2 flush, the call between two events, a synchronize, then the evidence.
Between two calls the device idles for a while. This script times the same two kernels
(an fp32 GEMM 1024x4096x4096 with a bias+ReLU+scale epilogue, and axpby over 2 x 2^24 floats)
in several ways in one process, and prints the median of each next to triton's do_bench:

- back to back: the harness's own call (tools/timing.py), nothing between calls;
- with the device idle for G ms between calls (sleep), for several G;
- with a round trip to another process before each call (the controller's go/done);
- with a second process holding a CUDA context of its own (idle, then stopped with SIGSTOP).

The SM clock is sampled by nvidia-smi during each variant.

    python benchmarks/call_gaps.py --gpu
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))


def _kernels():
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    m, k, n = 1024, 4096, 4096
    x = torch.randn(m, k, device="cuda")
    w = torch.randn(n, k, device="cuda") / k**0.5
    b = torch.randn(n, device="cuda")

    def gemm(x, w, b):
        return torch.relu(torch.nn.functional.linear(x, w, b)) * 0.5

    big = 1 << 24
    u, v = torch.randn(big, device="cuda"), torch.randn(big, device="cuda")

    def axpby(u, v):
        return u * 1.5 + v * -0.75

    def axpby_one_kernel(u, v):
        return torch.add(u, v, alpha=-0.5)

    return {
        "gemm_epilogue": (gemm, [x, w, b]),
        "axpby": (axpby, [u, v]),
        "add (one kernel)": (axpby_one_kernel, [u, v]),
    }


class ClockSampler:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-lms", "50"],
            stdout=subprocess.PIPE,
            text=True,
        )

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        out = self.proc.communicate(timeout=5)[0]
        vals = [int(x) for x in out.split() if x.isdigit()]
        return f"{min(vals)}-{max(vals)} MHz (median {statistics.median(vals):.0f})" if vals else "n/a"


def _echo_child():
    """A process that answers each byte with a byte: the controller's round trip."""
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(a_w)
        os.close(b_r)
        while True:
            c = os.read(a_r, 1)
            if not c:
                os._exit(0)
            os.write(b_w, c)
    os.close(a_r)
    os.close(b_w)
    return pid, a_w, b_r


def _context_holder(stop: bool):
    code = (
        "import torch,time,sys; torch.ones(1,device='cuda'); torch.cuda.synchronize();"
        "print('up',flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    if stop:
        proc.send_signal(signal.SIGSTOP)
    return proc


def _spin(us: float) -> None:
    import torch

    torch.cuda._sleep(int(us * 1980))  # cycles at the H200's 1980 MHz


def _warm_flushes(n: int) -> None:
    import torch

    buf = getattr(_warm_flushes, "buf", None)
    if buf is None:
        buf = _warm_flushes.buf = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for _ in range(n):
        buf.zero_()


def _warm_matmul(n: int) -> None:
    import torch

    a = _warm_matmul.a = getattr(_warm_matmul, "a", None)
    if a is None:
        a = _warm_matmul.a = torch.randn(2048, 2048, device="cuda")
    for _ in range(n):
        a @ a


def measure(
    fn,
    base,
    calls: int,
    gap_ms: float = 0.0,
    round_trip=None,
    before=None,
    after=None,
    guard: bool = False,
    block: int = 1,
) -> float:
    import op_guard  # tools/op_guard.py
    import timing  # tools/timing.py: the harness's own call

    caller = timing.Caller("cuda", lead_us=0)  # the bare call: what each variant adds is the point
    events = []
    for i in range(calls + 5):
        args = caller.prepare(base)
        if i % block == 0:
            if before is not None:
                before()
            if gap_ms:
                time.sleep(gap_ms / 1000.0)
            if round_trip is not None:
                _, w, r = round_trip
                os.write(w, b"g")
                os.read(r, 1)
            if after is not None:
                after()
        _, event_us, _ = caller.run(fn, args, 1000 + i, op_guard.StrictOpGuard("strict") if guard else None)
        if i >= 5:
            events.append(event_us)
        del args
    return statistics.median(events)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpu", action="store_true", required=True)
    p.add_argument("--calls", type=int, default=60)
    a = p.parse_args()
    import torch
    from triton.testing import do_bench

    rows = []
    for name, (fn, base) in _kernels().items():

        def variant(label, thunk):
            sampler = ClockSampler()
            time.sleep(0.1)
            us = thunk()
            rows.append((name, label, us, sampler.stop()))
            print(f"{name:<14} {label:<34} {us:9.1f} us   sm clock {rows[-1][3]}", flush=True)

        variant(
            "do_bench (median)",
            lambda: float(do_bench(lambda: fn(*base), warmup=25, rep=200, return_mode="median")) * 1000.0,
        )
        variant("harness call, back to back", lambda: measure(fn, base, a.calls))
        for gap in (0.2, 1.0, 10.0):
            variant(f"idle {gap} ms before each call", lambda gap=gap: measure(fn, base, a.calls, gap))
        variant("back to back, op guard on", lambda: measure(fn, base, a.calls, guard=True))
        echo = _echo_child()
        variant("round trip to a process", lambda: measure(fn, base, a.calls, round_trip=echo))
        variant("round trip, op guard on", lambda: measure(fn, base, a.calls, round_trip=echo, guard=True))
        variant(
            "round trip, 500 us spin queued before",
            lambda: measure(fn, base, a.calls, round_trip=echo, before=lambda: _spin(500)),
        )
        variant(
            "round trip, 300 us spin after",
            lambda: measure(fn, base, a.calls, round_trip=echo, after=lambda: _spin(300)),
        )
        variant(
            "round trip, 4 flushes after",
            lambda: measure(fn, base, a.calls, round_trip=echo, after=lambda: _warm_flushes(4)),
        )
        variant(
            "round trip, matmuls after",
            lambda: measure(fn, base, a.calls, round_trip=echo, after=lambda: _warm_matmul(20)),
        )
        variant("round trip per block of 5", lambda: measure(fn, base, a.calls, round_trip=echo, block=5))
        variant(
            "round trip per block of 5, guard", lambda: measure(fn, base, a.calls, round_trip=echo, block=5, guard=True)
        )
        variant("idle 1 ms, 4 flushes after", lambda: measure(fn, base, a.calls, 1.0, after=lambda: _warm_flushes(4)))
        variant("idle 1 ms, matmuls after", lambda: measure(fn, base, a.calls, 1.0, after=lambda: _warm_matmul(20)))
        variant(
            "idle 1 ms, 1 ms spin queued before", lambda: measure(fn, base, a.calls, 1.0, before=lambda: _spin(1000))
        )
        os.close(echo[1])
        os.waitpid(echo[0], 0)
        for stop in (False, True):
            holder = _context_holder(stop)
            try:
                variant(f"second CUDA context ({'stopped' if stop else 'idle'})", lambda: measure(fn, base, a.calls))
            finally:
                if stop:
                    holder.send_signal(signal.SIGCONT)
                holder.kill()
                holder.wait()
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
