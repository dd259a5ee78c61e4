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
clock bounds it (harness/clock_stats.py). Before the fresh copy of the inputs and after the
synchronize, any L2 the process set aside for persisting lines is taken back
(l2_persistence.py), so the flush evicts everything and the baselines run with the whole L2.

On the CPU a call is queued as: the perturbation, then, when its inputs outgrow the core's
private cache, a read through a buffer larger than the last-level cache, then the call between
two readings of the thread's CPU time. The sweep does for the CPU what the L2 flush does for the
device: every such call starts from the same cold caches, whatever the call before it left
there. Without it, how much of a freshly written input was still cached depended on what else
shared the last-level cache (other tenants of a virtual machine's host), and that moved
memory-bound code more than the rest: the ratio of the same two functions drifted 10-20% from
one profile to the next (docs/benchmarks.md). Inputs that fit the private cache are hot in it
after the perturbation whatever the neighbours do, and the sweep's few milliseconds would
only blur the clock that bounds a small call's claims.

A burst (CUDA, for kernels too short for the call above to resolve from outside) makes K calls
back to back on K inputs made and given their values beforehand: no lead-in, no flush, no events,
a device-wide synchronize after each call. Around a call the harness then does a few
microseconds of work where the call above does milliseconds, so the controller's clock, timing
the whole burst from outside, resolves what the K calls took; null bursts (the same calls around
a stand-in that launches one empty kernel) measure the rest (harness/clock_stats.py).

The numbers this process records are claims. The process that asked for the calls times whole
blocks of them from outside and decides what is believed (harness/clock_stats.py).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import draws
import leaves
import torch
import wire
from l2_persistence import persisting_l2_reset
from worker_common import fresh_clone

FLUSH_BYTES = 256 * 1024 * 1024
# Each element of a timed input is its input set's value times a factor in [1-SPREAD, 1+SPREAD]
# (tools/draws.py): far enough from every earlier call that a stale output fails the checks, the
# same sign and order of magnitude as what get_inputs() makes.
SPREAD = draws.SPREAD
# Device time queued ahead of each call while the host enters the call (µs): more than the
# strict op guard's dispatch of a typical forward costs on the host.
LEAD_US = 300.0

# The CPU's sweep reads this many times the largest cache, within these bounds (bytes); a
# call's inputs get it from half the private (L2) cache's size up.
CPU_FLUSH_FACTOR = 1.5
CPU_FLUSH_LEAST, CPU_FLUSH_MOST = 32 << 20, 192 << 20

_perf_ns = time.perf_counter_ns
_thread_ns = time.thread_time_ns


def call_inputs(base: list[Any], seed: int, device: str, plan: list[wire.DrawRule] | None = None) -> list[Any]:
    """The inputs of one call: a fresh copy of `base`, every leaf drawn anew from `seed` (`plan`)."""
    result: list[Any] = perturb(fresh_clone(base), seed, plan)
    return result


def tensor_leaves(args: Any) -> list[torch.Tensor]:
    """Every tensor of `args`, in any container, depth first: what a plan's entries follow."""
    return leaves.tensors(args)


def perturb(args: Any, seed: int, plan: list[wire.DrawRule] | None = None) -> Any:
    """Give every tensor leaf of `args` this call's values, in place, from `seed`
    (tools/draws.py says how each kind of leaf is drawn)."""
    return draws.redraw(args, seed, plan)


# What a Caller updates on every call, left out of its state.
_PER_CALL = ("_flush_filled", "lead_us", "flush_us")


class Caller:
    """Makes calls for one side (eager, torch.compile or the candidate) in one process."""

    def __init__(
        self,
        device: str,
        flush_bytes: int = FLUSH_BYTES,
        lead_us: float = LEAD_US,
        plan: list[wire.DrawRule] | None = None,
    ) -> None:
        self.device = device
        self.plan = plan  # how each call draws every input leaf anew (perturb)
        # What clears the caches before a call: on CUDA the L2 flush, before every call; on the
        # CPU the sweep, before calls whose inputs take `flush_from` bytes or more. The CPU's is
        # not touched before a call needs it, so it holds no memory until then.
        self.flush: torch.Tensor | None = None
        self.flush_from = 0
        self._flush_filled = False
        if device == "cuda" and flush_bytes:
            self.flush = torch.empty(flush_bytes, dtype=torch.int8, device="cuda")
        elif device == "cpu" and flush_bytes:
            private, largest = cpu_cache_bytes()
            self.flush_from = max(1, private // 2)
            size = min(max(int(largest * CPU_FLUSH_FACTOR), CPU_FLUSH_LEAST), CPU_FLUSH_MOST)
            self.flush = torch.empty(size // 4, dtype=torch.float32)
        if device == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            self._spin: Callable[[int], None] = torch.cuda._sleep  # bound before any candidate code exists
            # Before and after every call: no L2 set aside for persisting lines (l2_persistence).
            self._reset_l2 = persisting_l2_reset()
            self._lead_cycles = _cycles_for(lead_us, self._start, self._end) if lead_us > 0 else 0
            # What the device is like before every call, from two things timed on it: the
            # lead-in (one block counting SM clock cycles: it reads `lead_us` at the clock it was
            # calibrated at, and longer when the clock is lowered or the SMs are taken) and the
            # flush (memory bound: it reads longer when something else uses the memory). The
            # baselines' process reports both against their calibrated times.
            self._lead_start = torch.cuda.Event(enable_timing=True)
            self._lead_end = torch.cuda.Event(enable_timing=True)
            self._flush_start = torch.cuda.Event(enable_timing=True)
            self._flush_end = torch.cuda.Event(enable_timing=True)
            self.lead_calibrated_us = float(lead_us)
            self.flush_calibrated_us = _flush_time(self.flush, self._flush_start, self._flush_end)
        # The last call's lead-in and flush (µs; CUDA).
        self.lead_us: float | None = None
        self.flush_us: float | None = None
        # On the CPU with one thread a call runs wholly on the calling thread, so its time is
        # that thread's CPU time: what the call cost, not how often other programs took the
        # core meanwhile (their share of a loaded machine falls on long calls more than on
        # short ones, which skews every ratio). With more threads, the wall clock.
        self.cpu_time = device == "cpu" and torch.get_num_threads() == 1

    def state(self) -> list[tuple[Any, ...]]:
        """What every call's preparation rests on, by identity, and the flush's memory. Compared
        after candidate code has run in this process: a flush dropped or shrunk there would let
        its calls start from warm caches."""
        found: list[tuple[Any, ...]] = [(k, id(v)) for k, v in sorted(vars(self).items()) if k not in _PER_CALL]
        if isinstance(self.flush, torch.Tensor):
            found.append(
                ("flush memory", self.flush.data_ptr(), self.flush.numel(), self.flush.untyped_storage().nbytes())
            )
        return found

    def changes(self, before: list[tuple[Any, ...]]) -> list[str]:
        """One line per part of `state()` that differs from `before`."""
        now = dict((row[0], row[1:]) for row in self.state())
        was = dict((row[0], row[1:]) for row in before)
        return [
            f"the harness's caller: {name} was changed"
            for name in sorted(now.keys() | was.keys())
            if now.get(name) != was.get(name)
        ]

    def prepare(self, base: list[Any]) -> list[Any]:
        """A fresh copy of the call's input set, made and (CUDA) finished: the device is idle
        when this returns. Its values become the call's only in `run`."""
        if self.device == "cuda" and self._reset_l2 is not None:
            # First, so the copy's writes are normal lines, and whatever the reset leaves the
            # device doing is over by the synchronize below: `run` starts on an idle device.
            self._reset_l2()
        args: list[Any] = fresh_clone(base)
        if self.device == "cuda":
            torch.cuda.synchronize()
        return args

    def run(self, fn: Callable[..., Any], args: list[Any], seed: int, guard: Any = None) -> tuple[Any, float, float]:
        """Give `args` the call's values from `seed` and make the call:
        (output, claimed µs for the call, µs until the device was idle)."""
        with torch.no_grad():
            if self.device == "cuda":
                if self._lead_cycles:
                    self._lead_start.record()
                    self._spin(self._lead_cycles)
                    self._lead_end.record()
                perturb(args, seed, self.plan)
                if self.flush is not None:
                    self._flush_start.record()
                    self.flush.zero_()
                    self._flush_end.record()
                if guard is not None:
                    guard.__enter__()
                t0 = _perf_ns()
                self._start.record()
                try:
                    out = _dense(fn(*args))
                finally:
                    self._end.record()
                    if guard is not None:
                        guard.__exit__(None, None, None)
                torch.cuda.synchronize()
                wall = (_perf_ns() - t0) / 1000.0
                if self._reset_l2 is not None:  # before anything else runs: the reply, the baselines
                    self._reset_l2()
                if self._lead_cycles:
                    self.lead_us = self._lead_start.elapsed_time(self._lead_end) * 1000.0
                if self.flush is not None:
                    self.flush_us = self._flush_start.elapsed_time(self._flush_end) * 1000.0
                return out, self._start.elapsed_time(self._end) * 1000.0, wall
            perturb(args, seed, self.plan)
            if self.flush is not None and _tensor_bytes(args) >= self.flush_from:
                if not self._flush_filled:
                    # Untouched, every page of it reads as the one shared zero page: no sweep.
                    self.flush.fill_(1.0)
                    self._flush_filled = True
                # Read, not written: a sweep that wrote would leave the cache dirty, and the
                # call would pay for writing those lines back.
                self.flush.sum()
            clock = _thread_ns if self.cpu_time else _perf_ns
            if guard is not None:
                guard.__enter__()
            t0 = clock()
            try:
                out = _dense(fn(*args))
            finally:
                t1 = clock()
                if guard is not None:
                    guard.__exit__(None, None, None)
            return out, (t1 - t0) / 1000.0, (t1 - t0) / 1000.0

    def burst_inputs(self, base: list[Any], seed: int) -> list[Any]:
        """A burst call's inputs: a fresh copy of `base` with the call's values from `seed` (the
        same values `prepare` and `run` give it), queued; `burst` synchronizes before its calls."""
        if self.device == "cuda" and self._reset_l2 is not None:
            self._reset_l2()
        return call_inputs(base, seed, self.device, self.plan)

    def burst(
        self, fn: Callable[..., Any], inputs: list[list[Any]], guard_for: Callable[[], Any], null: bool = False
    ) -> tuple[list[Any], list[Any]]:
        """Call `fn` on each of `inputs` back to back, a device-wide synchronize after each:
        (the outputs, the guards). A null burst also launches one empty kernel after each call,
        so it pays the launch and the wait for it that a real call's kernel costs."""
        outs: list[Any] = []
        used: list[Any] = []
        cuda = self.device == "cuda"
        if cuda:
            torch.cuda.synchronize()
        with torch.no_grad():
            for args in inputs:
                guard = guard_for()
                guard.__enter__()
                try:
                    out = _dense(fn(*args))
                finally:
                    guard.__exit__(None, None, None)
                if cuda:
                    if null:
                        self._spin(1)
                    torch.cuda.synchronize()
                outs.append(out)
                used.append(guard)
        return outs, used

    def call(
        self, fn: Callable[..., Any], base: list[Any], seed: int, guard: Any = None
    ) -> tuple[Any, list[Any], float, float]:
        """prepare + run, for calls nobody times from outside (warm-ups)."""
        args = self.prepare(base)
        out, event, wall = self.run(fn, args, seed, guard)
        return out, args, event, wall


def _dense(out: Any) -> Any:
    """Every output tensor made contiguous inside the timed region, on the account of the side
    that returned it: a permuted or expanded view would otherwise hand its copy to the harness,
    which makes the outputs dense after the clock has stopped. Free for a contiguous output."""
    if isinstance(out, torch.Tensor):
        return out if out.is_contiguous() else out.contiguous()
    if isinstance(out, tuple) and not hasattr(type(out), "_fields"):
        return tuple(_dense(o) for o in out)
    if isinstance(out, list):
        return [_dense(o) for o in out]
    return out


def cpu_cache_bytes() -> tuple[int, int]:
    """(the private cache's size, the largest cache's size) of this machine's first core, from
    sysfs: its level-2 cache and its last one. Defaults where the kernel does not say: 1 MB
    and 32 MB."""
    sizes: dict[int, int] = {}
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(root)
    except OSError:
        entries = []
    for entry in entries:
        try:
            with open(f"{root}/{entry}/level") as f:
                level = int(f.read())
            with open(f"{root}/{entry}/size") as f:
                text = f.read().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes[level] = max(sizes.get(level, 0), int(digits) * scale)
    private = sizes.get(2) or 1 << 20
    return private, max([private, *sizes.values()]) if sizes else 32 << 20


def _tensor_bytes(args: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in args if isinstance(t, torch.Tensor))


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


def _flush_time(flush: Any, start: Any, end: Any) -> float | None:
    """The flush's time on a device nothing else uses (µs): the fastest of four after a first
    that wakes the clock. None without a flush."""
    if flush is None:
        return None
    fastest = float("inf")
    for i in range(5):
        start.record()
        flush.zero_()
        end.record()
        torch.cuda.synchronize()
        if i:
            fastest = min(fastest, start.elapsed_time(end) * 1000.0)
    return fastest


def device_ratio(caller: "Caller", leads: list[float], flushes: list[float]) -> float | None:
    """How much longer than calibrated a block's lead-ins and flushes took on the median, the
    larger of the two (CUDA; None elsewhere): 1 on a device nothing else used at its full clock."""
    import statistics

    ratios = []
    lead: float | None = getattr(caller, "lead_calibrated_us", None)
    flush: float | None = getattr(caller, "flush_calibrated_us", None)
    if leads and lead:
        ratios.append(statistics.median(leads) / lead)
    if flushes and flush:
        ratios.append(statistics.median(flushes) / flush)
    return max(ratios) if ratios else None


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
