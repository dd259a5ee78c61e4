"""Locked: what the reference must at least do, and what this machine can do, for the roofline.

Run in the baselines' process, where no candidate code ever ran: the reference's floating-point
operations (torch.utils.flop_counter, on one call) and the bytes it must at least move (every
input, parameter, buffer and output read or written once), and the machine's memory bandwidth
and matmul throughput measured here. The host puts them beside a table of known GPUs
(harness/peaks.py) to draw each side's fraction of the speed-of-light time.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import wire
from worker_common import device_sync

# Bytes copied per measurement of the bandwidth: well past every cache of the machine.
_COPY_BYTES = {"cuda": 1 << 30, "cpu": 256 << 20}
_MATMUL_N = {"cuda": 8192, "cpu": 1024}
_REPEATS = 5


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _leaves(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _leaves(v)]
    return []


def _bytes(tensors: list[torch.Tensor]) -> int:
    seen: set[int] = set()
    total = 0
    for t in tensors:
        if t.device.type == "meta":
            continue
        key = t.untyped_storage().data_ptr() if t.numel() else id(t)
        if key in seen:  # one storage read once, however many views of it are passed
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def _dominant_dtype(tensors: list[torch.Tensor]) -> str:
    """The floating dtype holding most of the bytes (the one whose peak bounds the work)."""
    sizes: dict[str, int] = {}
    for t in tensors:
        if t.is_floating_point() or t.is_complex():
            name = str(t.dtype).removeprefix("torch.")
            sizes[name] = sizes.get(name, 0) + t.numel() * t.element_size()
    return max(sizes, key=lambda k: sizes[k]) if sizes else "float32"


def reference_work(model: Any, inputs: list[Any]) -> wire.Work:
    """The reference's FLOPs on one call and the bytes it must at least move."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        out = model(*inputs)
    state: list[torch.Tensor] = []
    if isinstance(model, torch.nn.Module):
        state = [*model.parameters(), *model.buffers()]
    moved = _leaves(inputs) + state + _leaves(out)
    return {
        "flops": int(counter.get_total_flops()),
        "bytes": _bytes(moved),
        "dtype": _dominant_dtype(_leaves(inputs) + state + _leaves(out)),
    }


def _best_seconds(fn: Any, device: str) -> float:
    fn()
    device_sync(device)
    best = float("inf")
    for _ in range(_REPEATS):
        start = time.perf_counter()
        fn()
        device_sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def _copy_seconds(device: str, n_bytes: int) -> float:
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    return _best_seconds(lambda: dst.copy_(src), device)


def _matmul_seconds(device: str, n: int) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    return _best_seconds(lambda: torch.mm(a, b), device)


def machine_peaks(device: str) -> wire.Peaks:
    """This machine's memory bandwidth (a copy: read and write) and float32 matmul throughput,
    the best of a few runs."""
    n_bytes, n = _COPY_BYTES[device], _MATMUL_N[device]
    copy_s = _copy_seconds(device, n_bytes)
    mm_s = _matmul_seconds(device, n)
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"bandwidth": 2 * n_bytes / copy_s, "matmul_flops_float32": 2 * n**3 / mm_s}
