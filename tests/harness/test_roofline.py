"""The speed-of-light time and the baselines a harness times (pure functions)."""

from __future__ import annotations

import pytest

from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.harness.baselines import compiled_baselines
from cuda_agent_cli.harness.roofline import device_peak, roofline


def test_a_known_gpu_reads_the_table_and_keeps_the_measured_bandwidth_beside_it() -> None:
    peak = device_peak("NVIDIA H200", "bfloat16", {"bandwidth": 4.1e12, "matmul_flops_float32": 5e13})
    assert peak is not None and peak.flops == 989e12 and peak.bandwidth == 4.8e12
    assert peak.source == "table (NVIDIA H200)" and peak.measured_bandwidth == 4.1e12
    # float32 runs on the CUDA cores (the harness turns TF32 off).
    assert device_peak("NVIDIA H200", "float32", None).flops == 67e12  # type: ignore[union-attr]


def test_a_measurement_well_above_the_table_replaces_its_bandwidth() -> None:
    peak = device_peak("NVIDIA A100-SXM4-40GB", "float32", {"bandwidth": 2.0e12, "matmul_flops_float32": 1e13})
    assert peak is not None and peak.bandwidth == 2.0e12 and "measured" in peak.source


def test_the_cpu_and_unknown_gpus_use_what_was_measured() -> None:
    measured = {"bandwidth": 2e10, "matmul_flops_float32": 1e11}
    cpu = device_peak(None, "float32", measured)
    assert cpu is not None and (cpu.flops, cpu.bandwidth, cpu.source) == (1e11, 2e10, "measured")
    assert device_peak(None, "float64", measured).flops == 5e10  # type: ignore[union-attr]
    assert device_peak("Some Future GPU", "float16", measured).source == "measured"  # type: ignore[union-attr]
    assert device_peak(None, "float32", None) is None


def test_speed_of_light_is_the_larger_of_compute_and_memory_time() -> None:
    peak = device_peak(None, "float32", {"bandwidth": 1e9, "matmul_flops_float32": 1e9})
    assert peak is not None
    # 4 MB at 1 GB/s: 4 ms; 1 MFLOP at 1 GFLOP/s: 1 ms. Memory-bound at 4000 us.
    line = roofline(
        {"flops": 10**6, "bytes": 4 * 10**6, "dtype": "float32"}, peak, {"eager": 8000.0, "candidate": 4000.0}
    )
    assert line["sol_us"] == pytest.approx(4000.0) and line["bound"] == "memory"
    assert line["fractions"] == {"eager": 0.5, "candidate": 1.0} and line["intensity"] == 0.25
    # A GEMM: compute-bound.
    gemm = roofline({"flops": 10**10, "bytes": 10**6, "dtype": "float32"}, peak, {"candidate": 2e7})
    assert gemm["bound"] == "compute" and gemm["fractions"]["candidate"] == 0.5


def test_baselines_default_to_every_one_the_device_has() -> None:
    assert compiled_baselines(None, "cuda", env={}) == ("compile", "autotune", "graphs")
    assert compiled_baselines(None, "cpu", env={}) == ("compile", "autotune")
    # The default mode is always timed; graphs never on the CPU.
    assert compiled_baselines(["graphs"], "cpu", env={}) == ("compile",)
    assert compiled_baselines(None, "cpu", env={"CUDA_AGENT_BASELINES": "autotune"}) == ("compile", "autotune")
    with pytest.raises(BadInput, match="unknown baseline 'fast'"):
        compiled_baselines(None, "cpu", env={"CUDA_AGENT_BASELINES": "compile,fast"})
