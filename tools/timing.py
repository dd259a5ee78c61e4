"""Locked: time a callable the same way for the candidate and for both baselines.

Per timed call: fresh input clones, then (CUDA) an L2 flush, then start event -> call -> end event,
then a device-wide synchronize. Clones and flush are enqueued before the start event, so they are
never inside the measurement, while the GPU is still busy flushing when the call is launched, so
launch latency is hidden just as in triton's do_bench. A few audit calls afterwards record the
end event only after a device-wide synchronize: work hidden on another stream shows up there even
when the timed stream's events miss it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from worker_common import fresh_clone

FLUSH_BYTES = 256 * 1024 * 1024


def scaled_inputs(inputs: list[Any], scale: float) -> list[Any]:
    """Fresh copies of `inputs`, floating-point tensors multiplied by `scale` (others as they are)."""
    out = fresh_clone(inputs)
    if scale != 1.0:
        for t in out:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                t.mul_(scale)
    return out


def method_string(device: str, trials: int, warmup: int, flush_bytes: int) -> str:
    if device == "cuda":
        flush = f"+l2flush({flush_bytes // (1024 * 1024)}MB)" if flush_bytes else ""
        return f"cuda-events+device-sync{flush}+fresh-clones, median of {trials} after {warmup} warm-up"
    return f"perf_counter+fresh-clones+fixed-malloc-threshold, median of {trials} after {warmup} warm-up"


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


def time_calls(fn: Callable[..., Any], input_sets: list[list[Any]], device: str, trials: int, warmup: int,
               flush_bytes: int = FLUSH_BYTES, save_at: tuple[int, ...] = (),
               order: list[int] | None = None, scales: list[float] | None = None) -> dict[str, Any]:
    """Per-call times in µs (events on CUDA, perf_counter on CPU) plus the outputs at `save_at`.

    Call i gets a fresh copy of input_sets[order[i]] with its floating-point tensors multiplied
    by scales[i]: every call sees values no earlier call saw, so a result cached by pointer,
    shape, call count or sampled values is wrong at the calls whose outputs are checked.
    """
    order = list(order) if order else [0] * trials
    scales = list(scales) if scales else [1.0] * trials

    def pick(i: int) -> list[Any]:
        return scaled_inputs(input_sets[order[i % len(order)]], scales[i % len(scales)])

    saved: dict[int, Any] = {}
    times: list[float] = []
    wall: list[float] = []
    wanted = set(save_at)
    save_s = 0.0
    with torch.no_grad():
        if device == "cuda":
            flush = torch.empty(flush_bytes, dtype=torch.int8, device="cuda") if flush_bytes else None
            for w in range(warmup):
                fn(*pick(w))
                torch.cuda.synchronize()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
            torch.cuda.synchronize()
            for i in range(trials):
                args = pick(i)
                if flush is not None:
                    flush.zero_()
                starts[i].record()
                out = fn(*args)
                ends[i].record()
                torch.cuda.synchronize()
                if i in wanted:
                    # A copy on the device now (a later call may reuse the returned buffer);
                    # written out for the judge after the loop.
                    t0 = time.perf_counter()
                    saved[i] = fresh_clone(out)
                    torch.cuda.synchronize()
                    save_s += time.perf_counter() - t0
                del out, args
            times = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)]
            # Audit calls: the end event is recorded only after the whole device is idle, so work
            # hidden on another stream is inside these; compared with `times` by the harness.
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for i in range(min(10, trials)):
                args = pick(i)
                if flush is not None:
                    flush.zero_()
                start.record()
                out = fn(*args)
                torch.cuda.synchronize()
                end.record()
                torch.cuda.synchronize()
                wall.append(start.elapsed_time(end) * 1000.0)
                del out, args
        else:
            for w in range(warmup):
                fn(*pick(w))
            for i in range(trials):
                args = pick(i)
                t0 = time.perf_counter_ns()
                out = fn(*args)
                t1 = time.perf_counter_ns()
                times.append((t1 - t0) / 1000.0)
                wall.append((t1 - t0) / 1000.0)
                if i in wanted:
                    saved[i] = fresh_clone(out)
                del out, args
    return {"times_us": times, "wall_us": wall, "saved": saved, "save_s": save_s,
            "method": method_string(device, trials, warmup, flush_bytes if device == "cuda" else 0)}
