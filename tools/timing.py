"""Locked: one call, made the same way for every checked and every timed call, on every side.

A call gets a fresh copy of one input set whose floating-point tensors are multiplied element by
element by factors in [1 - SPREAD, 1 + SPREAD] drawn from the call's own seed, on the device.
The seed reaches the process only when the call is asked for, so no input value can be known
before its call, and no two calls see the same values: a result cached by pointer, shape, call
count or sampled values is wrong wherever it is checked, and no cheap transform of an earlier
output gives the new one.

On CUDA a call is queued as: a spin of the device (one block, LEAD_US long), the perturbation
of the inputs, an L2 flush, the call between two events, then a device-wide synchronize before
the call counts as done. The spin keeps the device busy while this process gets the call going,
so the events read the device's time for the call and not the host's latency to launch it (the
op guard's Python dispatch included), and the device never idles right before a timed call (an
idle H200 reads a GEMM 5-20% slow afterwards; benchmarks/call_gaps.py). The inputs take their
values only after the spin: work a call starts on a stream of its own, beside the spin, reads
inputs that are not yet the call's and is wrong wherever it is checked. What such work can
overlap is the perturbation and the flush, as in any flushed benchmark, and the controller's
clock bounds it (harness/scoring.py).

The numbers this process records are claims. The process that asked for the calls times whole
blocks of them from outside and decides what is believed (harness/scoring.py).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from worker_common import fresh_clone

FLUSH_BYTES = 256 * 1024 * 1024
# Each element of a timed input is its input set's value times a factor in [1-SPREAD, 1+SPREAD]:
# far enough from every earlier call that a stale output fails the checks, the same sign and
# order of magnitude as what get_inputs() makes.
SPREAD = 0.5
# Device time queued ahead of each call while the host enters the call (µs): more than the
# strict op guard's dispatch of a typical forward costs on the host.
LEAD_US = 300.0

_perf_ns = time.perf_counter_ns
_thread_ns = time.thread_time_ns


def call_inputs(base: list[Any], seed: int, device: str) -> list[Any]:
    """The inputs of one call: a fresh copy of `base`, floating tensors perturbed from `seed`."""
    return perturb(fresh_clone(base), seed)


def perturb(args: list[Any], seed: int) -> list[Any]:
    """Multiply every floating tensor of `args` in place by factors drawn from `seed`."""
    gen = None
    for t in args:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            if gen is None:
                gen = torch.Generator(device=t.device)
                gen.manual_seed(int(seed))
            if t.device.type == "cpu" and t.numel() > CPU_DIRECT:
                _perturb_periodic(t, gen)
                continue
            factor = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32)
            factor.mul_(2 * SPREAD).add_(1 - SPREAD)
            t.mul_(factor.to(t.dtype))
    return args


# On the CPU one draw per element costs more than many calls it would time (about 5 ns each on
# one thread: 4 ms for a 3 MB input). A large tensor there is multiplied instead by three fresh
# random vectors of pairwise coprime lengths, each repeated along its flattened elements: every
# element's factor is the product of three draws, and no two elements closer than the lengths'
# product (7e10) share all three. Each vector spans the cube root of the range, so the factors
# still lie in [1 - SPREAD, 1 + SPREAD].
CPU_PERIODS = (4093, 4099, 4111)
CPU_DIRECT = 4 * max(CPU_PERIODS)


def _perturb_periodic(t: torch.Tensor, gen: torch.Generator) -> None:
    # The factors are made in row-major order of t's elements whatever its layout, then applied
    # in one multiply, so every copy of an input (the judge's, the candidate's) gets the same bits.
    lo, hi = (1 - SPREAD) ** (1 / 3), (1 + SPREAD) ** (1 / 3)
    draws = torch.rand(sum(CPU_PERIODS), generator=gen, dtype=torch.float32)
    draws.mul_(hi - lo).add_(lo)
    n = t.numel()
    factor = torch.ones(n, dtype=torch.float32)
    start = 0
    for period in CPU_PERIODS:
        piece = draws[start:start + period]
        start += period
        whole = n - n % period
        factor[:whole].view(-1, period).mul_(piece)
        if whole < n:
            factor[whole:].mul_(piece[:n - whole])
    t.mul_(factor.view(t.shape).to(t.dtype))


class Caller:
    """Makes calls for one side (eager, torch.compile or the candidate) in one process."""

    def __init__(self, device: str, flush_bytes: int = FLUSH_BYTES, lead_us: float = LEAD_US) -> None:
        self.device = device
        self.flush = None
        if device == "cuda" and flush_bytes:
            self.flush = torch.empty(flush_bytes, dtype=torch.int8, device="cuda")
        if device == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            self._spin = torch.cuda._sleep  # bound before any candidate code exists
            self._lead_cycles = _cycles_for(lead_us, self._start, self._end) if lead_us > 0 else 0
        # On the CPU with one thread a call runs wholly on the calling thread, so its time is
        # that thread's CPU time: what the call cost, not how often other programs took the
        # core meanwhile (their share of a loaded machine falls on long calls more than on
        # short ones, which skews every ratio). With more threads, the wall clock.
        self.cpu_time = device == "cpu" and torch.get_num_threads() == 1

    def prepare(self, base: list[Any]) -> list[Any]:
        """A fresh copy of the call's input set, made and (CUDA) finished: the device is idle
        when this returns. Its values become the call's only in `run`."""
        args = fresh_clone(base)
        if self.device == "cuda":
            torch.cuda.synchronize()
        return args

    def run(self, fn: Callable[..., Any], args: list[Any], seed: int,
            guard: Any = None) -> tuple[Any, float, float]:
        """Give `args` the call's values from `seed` and make the call:
        (output, claimed µs for the call, µs until the device was idle)."""
        with torch.no_grad():
            if self.device == "cuda":
                if self._lead_cycles:
                    self._spin(self._lead_cycles)
                perturb(args, seed)
                if self.flush is not None:
                    self.flush.zero_()
                if guard is not None:
                    guard.__enter__()
                t0 = _perf_ns()
                self._start.record()
                try:
                    out = fn(*args)
                finally:
                    self._end.record()
                    if guard is not None:
                        guard.__exit__(None, None, None)
                torch.cuda.synchronize()
                wall = (_perf_ns() - t0) / 1000.0
                return out, self._start.elapsed_time(self._end) * 1000.0, wall
            perturb(args, seed)
            clock = _thread_ns if self.cpu_time else _perf_ns
            if guard is not None:
                guard.__enter__()
            t0 = clock()
            try:
                out = fn(*args)
            finally:
                t1 = clock()
                if guard is not None:
                    guard.__exit__(None, None, None)
            return out, (t1 - t0) / 1000.0, (t1 - t0) / 1000.0

    def call(self, fn: Callable[..., Any], base: list[Any], seed: int,
             guard: Any = None) -> tuple[Any, list[Any], float, float]:
        """prepare + run, for calls nobody times from outside (warm-ups)."""
        args = self.prepare(base)
        out, event, wall = self.run(fn, args, seed, guard)
        return out, args, event, wall


def _cycles_for(us: float, start: Any, end: Any) -> int:
    """Spin cycles that keep the device busy at least `us` µs. The spin counts SM clock cycles,
    and an idle device starts at a fraction of its clock: the probe runs until the clock is up
    and the fastest reading counts, so a spin is never shorter than asked, only longer while
    the clock is low."""
    probe = 2_000_000
    fastest = float("inf")
    for i in range(4):
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        torch.cuda.synchronize()
        if i:  # the first launch loads the kernel and wakes the clock
            fastest = min(fastest, start.elapsed_time(end) * 1000.0)
    per_us = probe / max(fastest, 1.0)
    return max(1, int(us * per_us))


def measure_write_bandwidth(device: str) -> float | None:
    """Bytes per second for writing a buffer larger than L2: the roofline's memory ceiling."""
    if device != "cuda":
        return None
    buf = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    buf.zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        start.record()
        buf.zero_()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1000.0)
    del buf
    return FLUSH_BYTES / best if best > 0 else None
