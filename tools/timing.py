"""Locked: one call, made the same way for every checked and every timed call, on every side.

A call gets a fresh copy of one input set whose floating-point tensors are multiplied element by
element by factors in [1 - SPREAD, 1 + SPREAD] drawn from the call's own seed, on the device.
The seed reaches the process only when the call is asked for, so no input value can be known
before its call, and no two calls see the same values: a result cached by pointer, shape, call
count or sampled values is wrong wherever it is checked, and no cheap transform of an earlier
output gives the new one. Then (CUDA) a device-wide synchronize, an L2 flush, the call between
two events, and a device-wide synchronize before the call counts as done. Calls of a block follow each other with no pause (the controller times the
block as a whole): an H200 left idle for a fraction of a millisecond before a call reads a GEMM
5-20% slow (benchmarks/call_gaps.py). Nothing but the flush runs ahead of the call: a lead-in
that leaves the device free (a spin on one SM) would let work the call starts on a stream of
its own run hidden beside it.

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

_perf_ns = time.perf_counter_ns


def call_inputs(base: list[Any], seed: int, device: str) -> list[Any]:
    """The inputs of one call: a fresh copy of `base`, floating tensors perturbed from `seed`."""
    out = fresh_clone(base)
    gen = None
    for t in out:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            if gen is None:
                gen = torch.Generator(device=t.device)
                gen.manual_seed(int(seed))
            factor = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32)
            factor.mul_(2 * SPREAD).add_(1 - SPREAD)
            t.mul_(factor.to(t.dtype))
    return out


class Caller:
    """Makes calls for one side (eager, torch.compile or the candidate) in one process."""

    def __init__(self, device: str, flush_bytes: int = FLUSH_BYTES) -> None:
        self.device = device
        self.flush = None
        if device == "cuda" and flush_bytes:
            self.flush = torch.empty(flush_bytes, dtype=torch.int8, device="cuda")
        if device == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)

    def prepare(self, base: list[Any], seed: int) -> list[Any]:
        """The call's inputs, made and (CUDA) finished: the device is idle when this returns, so
        work a call starts on a stream of its own can overlap the flush at most."""
        args = call_inputs(base, seed, self.device)
        if self.device == "cuda":
            torch.cuda.synchronize()
        return args

    def run(self, fn: Callable[..., Any], args: list[Any], guard: Any = None) -> tuple[Any, float, float]:
        """(output, claimed µs for the call, µs until the device was idle)."""
        with torch.no_grad():
            if self.device == "cuda":
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
            if guard is not None:
                guard.__enter__()
            t0 = _perf_ns()
            try:
                out = fn(*args)
            finally:
                t1 = _perf_ns()
                if guard is not None:
                    guard.__exit__(None, None, None)
            return out, (t1 - t0) / 1000.0, (t1 - t0) / 1000.0

    def call(self, fn: Callable[..., Any], base: list[Any], seed: int,
             guard: Any = None) -> tuple[Any, list[Any], float, float]:
        """prepare + run, for calls nobody times from outside (warm-ups)."""
        args = self.prepare(base, seed)
        out, event, wall = self.run(fn, args, guard)
        return out, args, event, wall


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
