"""The harness on the CUDA device (run on a GPU machine: pytest -m gpu tests/gpu)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from harness_tasks import AXPBY_NEW, make_task_workspace  # noqa: E402


@pytest.fixture(scope="module")
def cuda_ws(tmp_path_factory: pytest.TempPathFactory, harness_cache_root: Path) -> Iterator:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from cuda_agent_cli.harness import Harness

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(harness_cache_root))
        ws = make_task_workspace("axpby", tmp_path_factory.mktemp("axpby"), "cuda")
        result = Harness(ws, device="cuda").compile()
        assert result.compiled, result.summary()
        yield ws


@pytest.fixture
def ws(cuda_ws, harness_cache: Path):
    cuda_ws.candidate.write_text(AXPBY_NEW)
    return cuda_ws


def failed(result) -> dict[str, str]:
    return {c.name: c.detail for c in result.failed_checks()}


def test_axpby_profile_is_correct_timed_and_rewarded(ws) -> None:
    from cuda_agent_cli.harness import Harness

    result = Harness(ws, device="cuda").profile()
    assert result.correct and result.reward is not None and result.reward >= 1, result.summary()
    t = result.timings
    clock = t.method.split(";")[0].split("+")
    assert t.trials >= 10 and clock[:3] == ["cuda-events", "device-sync", "l2flush(256MB)"], t.method
    assert "no-persisting-l2" in clock and "fresh-inputs" in clock, t.method
    assert "interleaved in blocks" in t.method
    lo, hi = t.speedup_vs_eager_interval
    assert lo <= t.speedup_vs_eager <= hi
    assert t.candidate_us > 0 and t.eager_us > 0 and t.compile_us > 0
    assert "axpby_vec4_kernel" in result.check("extension_kernel").detail
    assert result.check("timed_outputs").passed and result.environment["gpu"]
    assert "allow_tf32=False" in result.check("precision_flags").detail


def test_wrong_cuda_kernel_gets_minus_one(ws) -> None:
    from cuda_agent_cli.harness import Harness

    ws.candidate.write_text(AXPBY_NEW.replace("self.alpha, self.beta)", "self.alpha, self.beta + 0.1)"))
    result = Harness(ws, device="cuda").verify()
    assert result.reward == -1 and "correctness" in failed(result), result.summary()


def test_ghost_kernel_is_caught_by_the_profiler(ws) -> None:
    from cuda_agent_cli.harness import Harness

    # The extension is imported and its kernels are compiled, but forward never launches them.
    ws.candidate.write_text(
        AXPBY_NEW.replace(
            "return cuda_extension.axpby(x, y, self.alpha, self.beta)", "return self.alpha * x + self.beta * y"
        )
    )
    result = Harness(ws, device="cuda", policy="hybrid").verify()
    assert result.reward == -1 and "extension_kernel" in failed(result), result.summary()
    assert result.check("correctness").passed


def test_nvcc_error_is_trimmed_and_only_the_edited_object_rebuilds(ws) -> None:
    from cuda_agent_cli.harness import Harness

    harness = Harness(ws, device="cuda")
    cu = ws.kernels_dir / "axpby.cu"
    original = cu.read_text()
    try:
        cu.write_text(original.replace("float4 xv = x[i];", "float4 xv = x[i] + undefined_thing;"))
        result = harness.verify()
        detail = failed(result)["compile"]
        assert result.reward == -1 and detail.startswith("kernels/axpby.cu(") and "undefined_thing" in detail
        cu.write_text(original + "\n// edited\n")
        assert harness.compile().compiled
        assert harness.last_compile["rebuilt"] == ["obj/kernels/axpby.cu.o", "module/cuda_extension.so"]
    finally:
        cu.write_text(original)
        harness.compile()


def test_illegal_address_kills_only_the_candidate(ws) -> None:
    from cuda_agent_cli.harness import Harness

    cu = ws.kernels_dir / "axpby.cu"
    original = cu.read_text()
    harness = Harness(ws, device="cuda")
    try:
        cu.write_text(original.replace("float4 xv = x[i];", "float4 xv = x[i + (1LL << 40)];"))
        result = harness.verify()
        assert result.reward == -1 and ({"crash", "timeout"} & set(failed(result))), result.summary()
    finally:
        cu.write_text(original)
    assert harness.verify().correct


def test_cli_profile_json_on_cuda(ws, harness_cache: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "profile", str(ws.root), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["device"] == "cuda" and data["correct"] and data["reward"] >= 1
    assert data["timings"]["trials"] >= 10 and data["environment"]["gpu"]
    assert len(data["timings"]["speedup_vs_eager_interval"]) == 2 and "uncertain" in data["timings"]


def test_gemm_epilogue_with_cublas_passes_strict(tmp_path: Path, harness_cache: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from cuda_agent_cli.harness import Harness

    ws = make_task_workspace("gemm_epilogue", tmp_path / "gemm", "cuda")
    result = Harness(ws, device="cuda").profile()
    assert result.correct and result.reward >= 1, result.summary()
    assert "bias_relu_scale_kernel" in result.check("extension_kernel").detail


def test_a_forward_that_dispatches_many_allowed_ops_is_not_held_to_the_clocks_bound(ws) -> None:
    """Each op a forward dispatches (here 8 views) costs the op guard's Python dispatch on
    the host, which the kernel's device events never see: the null blocks' stand-in pays the
    same, so the clock's bound does not charge it to a 50 us kernel."""
    from cuda_agent_cli.harness import Harness

    plain = Harness(ws, device="cuda").profile()
    ws.candidate.write_text(
        AXPBY_NEW.replace(
            "        return cuda_extension.axpby(",
            "        for _ in range(4):\n"
            "            x = x.view(-1).view(x.shape)\n"
            "        return cuda_extension.axpby(",
        )
    )
    busy = Harness(ws, device="cuda").profile()
    assert busy.correct and busy.timings is not None, busy.summary()
    assert busy.timing_detail["clamped_blocks"] <= 1, busy.timing_detail
    assert busy.timings.candidate_us < 1.15 * plain.timings.candidate_us, (busy.timing_detail, plain.timing_detail)


def test_profile_on_cuda_times_max_autotune_and_cuda_graphs_and_reads_the_peak_table(ws) -> None:
    from cuda_agent_cli.harness import Harness

    result = Harness(ws, device="cuda", baselines=("compile", "autotune", "graphs")).profile()
    assert result.correct and result.timings is not None, result.summary()
    t = result.timings
    assert set(t.baselines) == {"eager", "compile", "autotune", "graphs"}, (t.baselines, result.warnings)
    assert t.best_baseline in t.baselines and t.speedup_vs_best is not None
    line = t.roofline
    assert line is not None and line["bound"] == "memory" and line["sol_us"] > 0, line
    gpu = result.environment.get("gpu") or ""
    if "H200" in gpu or "H100" in gpu:
        # The table's bandwidth, checked against the one measured on the machine.
        assert line["peak_source"].startswith("table") and line["measured_bandwidth"] > 1e12, line
    assert 0 < t.fraction_of_peak < 1.5
