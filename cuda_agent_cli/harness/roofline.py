"""How close each side comes to what the hardware allows: the speed-of-light time of a task.

The reference's floating-point operations and the bytes it must at least move come from the
baselines' process (tools/roofline.py); the device's peak FLOP/s for the task's dtype and its
memory bandwidth come from the table of known GPUs below, checked against a bandwidth measured
on the machine, or on the CPU (and an unknown GPU) from what was measured there. The
speed-of-light time is the larger of FLOPs over peak and bytes over bandwidth; a side's fraction
of peak is that time over the side's own (1.0: at the roofline).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

# Dense peak FLOP/s by dtype (float32 on the CUDA cores: the harness turns TF32 off; float16 and
# bfloat16 on the tensor cores) and memory bandwidth in bytes per second, from the vendors'
# data sheets. Matched on the GPU's name, most specific first.
_TABLE: tuple[tuple[str, float, dict[str, float]], ...] = (
    ("h200", 4.8e12, {"float32": 67e12, "float16": 989e12, "bfloat16": 989e12, "float64": 67e12}),
    ("h100 pcie", 2.0e12, {"float32": 51e12, "float16": 756e12, "bfloat16": 756e12, "float64": 51e12}),
    ("h100", 3.35e12, {"float32": 67e12, "float16": 989e12, "bfloat16": 989e12, "float64": 67e12}),
    ("a100-sxm4-80gb", 2.039e12, {"float32": 19.5e12, "float16": 312e12, "bfloat16": 312e12, "float64": 19.5e12}),
    ("a100 80gb pcie", 1.935e12, {"float32": 19.5e12, "float16": 312e12, "bfloat16": 312e12, "float64": 19.5e12}),
    ("a100", 1.555e12, {"float32": 19.5e12, "float16": 312e12, "bfloat16": 312e12, "float64": 19.5e12}),
    ("l40s", 0.864e12, {"float32": 91.6e12, "float16": 362e12, "bfloat16": 362e12, "float64": 1.4e12}),
    ("l4", 0.3e12, {"float32": 30.3e12, "float16": 121e12, "bfloat16": 121e12, "float64": 0.5e12}),
    ("a10", 0.6e12, {"float32": 31.2e12, "float16": 125e12, "bfloat16": 125e12, "float64": 1e12}),
    ("4090", 1.008e12, {"float32": 82.6e12, "float16": 165e12, "bfloat16": 165e12, "float64": 1.3e12}),
    ("v100", 0.9e12, {"float32": 15.7e12, "float16": 125e12, "float64": 7.8e12}),
    ("t4", 0.32e12, {"float32": 8.1e12, "float16": 65e12, "float64": 0.25e12}),
)
# A measured bandwidth this far above the table's says the table does not describe this device
# (another memory, another part): the measurement is used instead.
_TABLE_DOUBT = 1.1


@dataclass(frozen=True)
class DevicePeak:
    """What the device can do for one dtype, and where the numbers came from."""

    flops: float  # FLOP/s
    bandwidth: float  # bytes/s
    source: str  # "table (NVIDIA H200)" or "measured"
    measured_bandwidth: float | None


def _table_row(gpu: str) -> tuple[float, dict[str, float]] | None:
    name = gpu.lower()
    for key, bandwidth, flops in _TABLE:
        if key in name:
            return bandwidth, flops
    return None


def device_peak(gpu: str | None, dtype: str, measured: Mapping[str, float] | None) -> DevicePeak | None:
    """The peak for `dtype` on this device: the table for a known GPU (its bandwidth replaced by
    the measured one when the measurement exceeds it clearly), else the measurement (the CPU's
    float32 matmul throughput standing for every floating dtype but float64, at half). None when
    there is neither."""
    seen = float(measured["bandwidth"]) if measured and measured.get("bandwidth") else None
    row = _table_row(gpu) if gpu else None
    if row is not None:
        bandwidth, flops = row
        peak_flops = flops.get(dtype) or flops["float32"]
        if seen is not None and seen > _TABLE_DOUBT * bandwidth:
            return DevicePeak(peak_flops, seen, f"table ({gpu}), bandwidth measured", seen)
        return DevicePeak(peak_flops, bandwidth, f"table ({gpu})", seen)
    if not measured or not measured.get("matmul_flops_float32") or seen is None:
        return None
    matmul = float(measured["matmul_flops_float32"])
    return DevicePeak(matmul / 2 if dtype == "float64" else matmul, seen, "measured", seen)


def roofline(work: Mapping[str, Any], peak: DevicePeak, times_us: Mapping[str, float]) -> dict[str, Any]:
    """The speed-of-light time of `work` on `peak` and each side's fraction of it."""
    flops, moved = float(work.get("flops") or 0), float(work.get("bytes") or 0)
    compute_s, memory_s = flops / peak.flops, moved / peak.bandwidth
    sol_us = max(compute_s, memory_s) * 1e6
    return {
        "sol_us": round(sol_us, 4),
        "flops": int(flops),
        "bytes": int(moved),
        "dtype": str(work.get("dtype") or "float32"),
        "intensity": round(flops / moved, 4) if moved else None,
        "bound": "compute" if compute_s > memory_s else "memory",
        "peak_flops": peak.flops,
        "bandwidth": peak.bandwidth,
        "peak_source": peak.source,
        "measured_bandwidth": peak.measured_bandwidth,
        "fractions": {side: round(sol_us / us, 5) for side, us in times_us.items() if us > 0},
    }


class MachinePeaks:
    """This machine's measured peaks for one device, kept in the cache once a baselines' process
    has measured them, so later rounds (and sessions) need not measure again."""

    def __init__(self, cache: Path, device: str) -> None:
        import platform

        key = hashlib.sha256(json.dumps([device, platform.node(), os.cpu_count()]).encode()).hexdigest()[:16]
        self.path = cache / "machine" / f"peaks-{key}.json"

    def known(self) -> dict[str, float] | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("bandwidth") else None

    def keep(self, peaks: Mapping[str, float]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(peaks)))
        os.replace(tmp, self.path)
