"""The harness-only bench of the project's suite on a CUDA GPU (tests/bench_suite).

The adversarial candidates are the CPU run's; the two honest ones are CUDA versions from
runs_cuda/ (a load_inline kernel and a CUDA-Agent workdir with a .cu file and its binding).
Prints how busy the GPU was during the run (nvidia-smi samples with utilization above 0).

Run on the GPU machine: pytest -m gpu -s tests/gpu/test_bench_gpu.py
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent_cli.bench.timeline import busy_fraction

pytestmark = pytest.mark.gpu

SUITE = Path(__file__).resolve().parents[1] / "bench_suite"
EXPECTED = {
    "level1/1_ReLU": "correct",
    "level1/2_ScaleShift": "failed",
    "level1/3_RowSum": "failed",
    "level1/4_Square": "failed",
    "level1/5_NoInputs": "error",
    "level2/1_ReluScale": "correct",
    "level2/2_AddMul": "failed",
    "level2/3_TanhSum": "failed",
}


@pytest.mark.timeout(1500)  # a cold run builds two CUDA extensions and torch.compile baselines
def test_harness_only_bench_of_the_suite_on_the_gpu(tmp_path: Path, harness_cache_root: Path):
    runs = tmp_path / "runs"
    shutil.copytree(SUITE / "runs", runs)
    (runs / "level_2_problem_1_sample_1_kernel.py").unlink()  # replaced by the CUDA workdir
    shutil.copytree(SUITE / "runs_cuda", runs, dirs_exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_")}
    env.update(XDG_CACHE_HOME=str(harness_cache_root), XDG_DATA_HOME=str(tmp_path / "data"))
    out = tmp_path / "out"
    sampler = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "200", "-i", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "cuda_agent_cli",
                "bench",
                "--suite",
                "kernelbench",
                "--root",
                str(SUITE),
                "--solutions",
                str(runs),
                "--device",
                "cuda",
                "--gpus",
                "0",
                "--out",
                str(out),
                "--plain",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    finally:
        sampler.terminate()
        samples = [int(x) for x in sampler.communicate()[0].split() if x.strip().isdigit()]
    assert proc.returncode == 0, proc.stderr
    records = {r["task"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert {k: r["status"] for k, r in records.items()} == EXPECTED, proc.stderr
    assert records["level2/1_ReluScale"]["best_sample"] == 1
    assert [s["correct"] for s in records["level1/1_ReLU"]["samples"]] == [True, False]
    for key in ("level1/1_ReLU", "level2/1_ReluScale"):
        assert records[key]["best"]["environment"]["gpu"], records[key]["best"]
    # Every task ran on the slot's GPU; the workdir candidate of level2/1 was built ahead on a
    # CPU worker while the slot scored an earlier task, and its round then rebuilt nothing.
    assert {r["gpu"] for r in records.values()} == {"0"}
    ahead = records["level2/1_ReluScale"]["compile_ahead"]
    assert ahead["error"] is None and [s["compiled"] for s in ahead["samples"]] == [True], ahead
    assert any(
        r["held"][0] < ahead["end"] and ahead["start"] < r["held"][1]
        for k, r in records.items()
        if k != "level2/1_ReluScale"
    )
    (compile_check,) = [c for c in records["level2/1_ReluScale"]["best"]["checks"] if c["name"] == "compile"]
    assert "(0 object(s) rebuilt)" in compile_check["detail"], compile_check
    held = busy_fraction(list(records.values()))
    summary = json.loads((out / "summary.json").read_text())
    busy = sum(1 for s in samples if s > 0) / len(samples) if samples else 0.0
    print(
        f"\nbench of the suite on {records['level1/1_ReLU']['best']['environment']['gpu']}: "
        f"{proc.stderr.splitlines()[-1] if proc.stderr else ''}; GPU busy in {100 * busy:.0f}% of "
        f"{len(samples)} samples, its scoring rounds held it {100 * held['overall']:.0f}% of the tasks' "
        f"{held['wall_s']:.0f} s; pass {summary['overall']['pass_rate']:.3f}"
    )
    print((out / "report.md").read_text().split("## Per level")[0])
