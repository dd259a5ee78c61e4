"""Compile-ahead on the CPU: while the slot scores one task, a builder builds the next queued
task's candidate (a CUDA-Agent workdir with a C++ kernel), and the slot's round reuses that build.

On a GPU the builders are on by default; on the CPU they are off (a build beside the timing takes
cores from it), so this test turns one on to see the same code path at work.
"""

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SUITE = Path(__file__).resolve().parents[1] / "bench_suite"
WORKDIR = SUITE / "workdirs" / "level1" / "1_ReLU"


def test_queued_builds_overlap_the_timing_and_are_reused(tmp_path: Path, harness_cache: Path):
    from cuda_agent_cli.bench.run import BenchRequest, plan_bench, run_bench
    from cuda_agent_cli.bench.timeline import busy_fraction

    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for k in (1, 2, 3):
        (level / f"{k}_ReLU{k}.py").write_text((SUITE / "KernelBench" / "level1" / "1_ReLU.py").read_text())
        shutil.copytree(WORKDIR, tmp_path / "runs" / f"level_1_problem_{k}")
    plan = plan_bench(
        BenchRequest(
            suite="kernelbench",
            root=tmp_path,
            out=tmp_path / "out",
            device="cpu",
            solutions=tmp_path / "runs",
            trials=5,
            compile_ahead=1,
        )
    )
    outcome = run_bench(plan)
    records = {r["task"]: r for r in outcome.records}
    assert [r["status"] for r in records.values()] == ["correct"] * 3, [r["error"] for r in records.values()]
    order = sorted(records.values(), key=lambda r: r["held"][0])
    assert "compile_ahead" not in order[0]  # the slot's first task: nothing was queued before it
    ahead = [r for r in order[1:] if "compile_ahead" in r]
    assert ahead, "no task was built ahead"
    for r in ahead:
        a = r["compile_ahead"]
        assert a["error"] is None and [s["compiled"] for s in a["samples"]] == [True]
        # Built while the slot held another task (its round, or the worker's warm-up before the
        # first one), and scored only once built.
        assert any(o["held"][0] < a["end"] and a["start"] < o["held"][1] for o in order if o is not r)
        assert r["device_busy"][0][0] >= a["end"]
        # The slot's round found the build done: no object compiled again.
        (compile_check,) = [c for c in r["best"]["checks"] if c["name"] == "compile"]
        assert "(0 object(s) rebuilt)" in compile_check["detail"], compile_check
    busy = busy_fraction(outcome.records)
    assert set(busy["devices"]) == {"cpu"} and 0 < busy["overall"] <= 1


def test_single_file_solutions_are_built_ahead_too(
    tmp_path: Path, harness_cache: Path, monkeypatch: pytest.MonkeyPatch
):
    """A KernelBench solution file builds its extension with load_inline as it is imported: a
    builder imports it alone, confined, so the slot's round only loads the built extension."""
    import re

    # Built here, by the builder: not found built by an earlier test.
    monkeypatch.delenv("CUDA_AGENT_INLINE_DIR", raising=False)

    from cuda_agent_cli.bench.run import BenchRequest, plan_bench, run_bench

    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    runs = tmp_path / "runs"
    runs.mkdir()
    # Two tasks: the slot builds the first itself while the builder builds the second.
    for k in (1, 2):
        (level / f"{k}_ReLU{k}.py").write_text((SUITE / "KernelBench" / "level1" / "1_ReLU.py").read_text())
        shutil.copy(
            SUITE / "runs" / "level_1_problem_1_sample_0_kernel.py", runs / f"level_1_problem_{k}_sample_0_kernel.py"
        )
    plan = plan_bench(
        BenchRequest(
            suite="kernelbench",
            root=tmp_path,
            out=tmp_path / "out",
            device="cpu",
            solutions=runs,
            trials=5,
            compile_ahead=1,
        )
    )
    outcome = run_bench(plan)
    records = {r["task"]: r for r in outcome.records}
    assert [r["status"] for r in records.values()] == ["correct"] * 2, [r["error"] for r in records.values()]
    ahead = [r for r in records.values() if "compile_ahead" in r]
    assert ahead, "no task was built ahead"
    for r in ahead:
        assert [s["compiled"] for s in r["compile_ahead"]["samples"]] == [True], r["compile_ahead"]
        (compile_check,) = [c for c in r["best"]["checks"] if c["name"] == "compile"]
        seconds = float(re.search(r"\(([\d.]+) s\)", compile_check["detail"]).group(1))
        assert seconds < 10, compile_check  # loaded, not built again (a build takes 20-60 s here)
