"""`cuda-agent bench` end to end on the CPU over the project's own suite (tests/bench_suite).

Harness-only mode scores honest and adversarial candidates; the first run is killed part way and
the rerun resumes, so the C++ builds (what a CPU run pays for) are paid for once. The metrics
are checked against values worked out from the recorded verdicts by hand.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from demo_repo import suite_env

pytestmark = pytest.mark.integration

SUITE = Path(__file__).resolve().parents[1] / "bench_suite"
EXPECTED = {
    "level1/1_ReLU": "correct",
    "level1/2_ScaleShift": "failed",
    "level1/3_RowSum": "failed",
    "level1/4_Square": "failed",
    "level1/5_NoInputs": "error",
    "level2/1_ReluScale": "failed",
    "level2/2_AddMul": "failed",
    "level2/3_TanhSum": "failed",
}


def bench_argv(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cuda_agent_cli",
        "bench",
        "--suite",
        "kernelbench",
        "--root",
        str(SUITE),
        "--device",
        "cpu",
        "--out",
        str(out),
        "--trials",
        "5",
        "--plain",
        *extra,
    ]


def env_for(tmp: Path, cache: Path) -> dict[str, str]:
    env = suite_env()
    env.update(XDG_DATA_HOME=str(tmp / "data"), XDG_CONFIG_HOME=str(tmp / "config"), XDG_CACHE_HOME=str(cache))
    return env


def lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.is_file() else []


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory, harness_cache_root: Path):
    tmp = tmp_path_factory.mktemp("bench")
    out, env = tmp / "out", env_for(tmp, harness_cache_root)
    argv = bench_argv(out, "--solutions", str(SUITE / "runs"))
    first = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and first.poll() is None and not lines(results):
        time.sleep(0.2)
    # Killed as a whole (the bench, its slot and the harness processes) in the middle of the run.
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate()
    before = {r["task"]: r for r in lines(results)}
    assert 1 <= len(before) < len(EXPECTED), "the kill was meant to land in the middle of the run"
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    return out, env, argv, before, second


def test_verdicts_of_honest_and_adversarial_candidates(scored):
    out, _, _, _, second = scored
    assert second.returncode == 0, second.stderr
    records = {r["task"]: r for r in lines(out / "results.jsonl")}
    assert {k: r["status"] for k, r in records.items()} == EXPECTED
    assert "no get_inputs()" in records["level1/5_NoInputs"]["error"]
    assert records["level1/3_RowSum"]["samples"][0]["failed_checks"] == ["static"]
    assert records["level1/4_Square"]["samples"][0]["failed_checks"] == ["static"]
    assert "no candidate" in records["level2/2_AddMul"]["error"]
    # Two samples: the load_inline kernel is correct and is the task's best, the zeros one is not.
    relu = records["level1/1_ReLU"]
    assert [s["correct"] for s in relu["samples"]] == [True, False]
    assert relu["best_sample"] == 0 and relu["pass_at_k"] == {"1": 0.5, "2": 1.0}
    assert relu["reward"] in (1, 2, 3) and relu["speedup_vs_eager"] > 0
    assert relu["best"]["timings"]["speedup_vs_compile"] == relu["speedup_vs_compile"]
    assert [s["failed_checks"] for s in records["level2/1_ReluScale"]["samples"]][1] == ["static"]
    # Each sample says where its round's time went, as the harness timed its stages and jobs.
    timed = relu["samples"][0]["seconds"]
    assert {"static", "candidate", "judge", "inputs.job", "candidate.timing"} <= set(timed)
    for s in (s for r in records.values() for s in r["samples"]):
        assert s["seconds"]["round"] >= s["seconds"].get("candidate", 0) + s["seconds"].get("judge", 0)
    assert set(records["level1/3_RowSum"]["samples"][0]["seconds"]) == {"static", "round"}  # stopped there


def test_resume_after_a_kill_skips_finished_tasks(scored):
    out, _, _, before, second = scored
    assert f"{len(EXPECTED) - len(before)} task(s) to run" in second.stderr
    assert f"{len(before)} already finished" in second.stderr
    keys = [r["task"] for r in lines(out / "results.jsonl")]
    assert sorted(keys) == sorted(EXPECTED)  # every task once: none of the finished ran again
    after = {r["task"]: r for r in lines(out / "results.jsonl")}
    assert all(after[k]["finished_at"] == r["finished_at"] for k, r in before.items())


def test_metrics_match_the_verdicts_worked_out_by_hand(scored):
    out = scored[0]
    records = {r["task"]: r for r in lines(out / "results.jsonl")}
    summary = json.loads((out / "summary.json").read_text())
    o = summary["overall"]
    assert (o["tasks"], o["correct"], o["errors"]) == (8, 1, 1)
    assert o["pass_rate"] == 1 / 8
    assert summary["levels"]["level1"]["pass_rate"] == 1 / 5
    assert summary["levels"]["level2"]["pass_rate"] == 0.0
    assert o["rewards"]["-1"] == 7 and sum(o["rewards"].values()) == 8
    relu = records["level1/1_ReLU"]
    for base, key in (("eager", "speedup_vs_eager"), ("compile", "speedup_vs_compile")):
        s, g = relu[key], o["geomean"][base]
        assert g["correct_only"] == {"value": pytest.approx(s), "ci95": pytest.approx([s, s]), "n": 1}
        assert g["failures_as_one"]["value"] == pytest.approx(s ** (1 / 8), rel=1e-9)
        lo, hi = g["failures_as_one"]["ci95"]
        assert lo <= g["failures_as_one"]["value"] <= hi
        assert o[f"faster_than_{base}"] == (1 / 8 if s > 1.05 else 0.0)
        assert o["fast_p"][base] == {
            "0": 1 / 8,
            "1": (1 / 8 if s > 1 else 0.0),
            "1.5": (1 / 8 if s > 1.5 else 0.0),
            "2": (1 / 8 if s > 2 else 0.0),
        }
    assert summary["levels"]["level2"]["geomean"]["eager"]["correct_only"]["value"] is None
    # The best baseline is the fastest of every baseline timed (max-autotune among them).
    best = relu["speedup_vs_best"]
    assert best <= min(relu["speedup_vs_eager"], relu["speedup_vs_compile"]) + 1e-3
    assert relu["best_baseline"] in relu["baselines"] and set(relu["baselines"]) >= {"eager", "compile"}
    assert o["geomean"]["best"]["correct_only"]["value"] == pytest.approx(best)
    # The reference's work on the roofline: a relu moves bytes and does no FLOPs as counted.
    assert (
        relu["roofline"]["bound"] == "memory"
        and 0 < relu["fraction_of_peak"] == relu["roofline"]["fractions"]["candidate"]
    )
    assert summary["baselines"][:2] == ["eager", "compile"]
    use = summary["utilization"]
    assert 0 < use["device_timing_share"]["cpu"] <= 1 and (use["cpu"] is None or 0 < use["cpu"] <= 1)
    # pass@1: 0.5 for ReLU (one of two samples), 0 for the rest; pass@2: 1 for ReLU.
    assert o["pass_at_k"] == {"1": pytest.approx(0.5 / 8), "2": pytest.approx(1 / 8)}
    assert [w["warning"] for w in summary["warnings"]] == relu["warnings"]
    suite = summary["suite"]
    assert suite["tasks"] == 8 and len(suite["tasks_sha256"]) == 64 and suite["git"]["commit"]


def test_reports_show_our_numbers_beside_the_paper(scored):
    out = scored[0]
    md = (out / "report.md").read_text()
    assert "| pass rate | 12.5% | 98.8% |" in md
    assert "96.8%" in md and "2.11x" in md and "level2/1_ReluScale" in md
    page = (out / "report.html").read_text()
    # Speedups per level, fast_p, the suite on its (memory) roofline, rewards.
    assert page.count("data:image/png;base64,") == 4 and "<script" not in page and "http" not in page
    assert "## Definitions" in md and "vs best" in md


def test_rerun_failed_redoes_only_the_failures(scored):
    out, env, argv, _, _ = scored
    proc = subprocess.run(
        [*argv, "--rerun-failed", "--level", "1", "--tasks", "1-4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 task(s) to run" in proc.stderr and "1 already finished" in proc.stderr
    keys = [r["task"] for r in lines(out / "results.jsonl")]
    assert keys.count("level1/1_ReLU") == 1 and keys.count("level1/3_RowSum") == 2


def test_bad_root_and_mixed_suite_versions(scored, tmp_path: Path):
    out, env, _, _, _ = scored
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent_cli",
            "bench",
            "--suite",
            "kernelbench",
            "--root",
            str(tmp_path),
            "--solutions",
            str(SUITE / "runs"),
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "o"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (err,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert "not a KernelBench checkout" in err and "level1/1_Name.py" in err
    # The same --out with another version of the suite is refused before anything runs.
    changed = tmp_path / "suite"
    subprocess.run(["cp", "-r", str(SUITE / "KernelBench"), str(changed)], check=True)
    (changed / "level1" / "1_ReLU.py").write_text((changed / "level1" / "1_ReLU.py").read_text() + "# v2\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent_cli",
            "bench",
            "--suite",
            "kernelbench",
            "--root",
            str(changed),
            "--solutions",
            str(SUITE / "runs"),
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "another version of the suite" in proc.stderr


def verdict(record: dict) -> tuple:
    """What must not depend on the scheduler: correctness and the failed checks of every sample
    (rewards and speedups are timings, which differ from one run to the next)."""
    return (
        record["status"],
        record["correct"],
        record["best_sample"],
        [(s["sample"], s["correct"], s["failed_checks"]) for s in record["samples"]],
    )


def dying_worker(markers: Path, once: set[str], always: set[str]):
    """A Ray task body that kills its own worker process (as a crash or the OOM killer would)
    the first time it meets a task in `once`, every time for a task in `always`, and otherwise
    runs the bench's task. Marker files tell a retry from the first attempt across workers."""

    def task(job: dict) -> dict:
        from cuda_agent_cli.bench.ray_runner import _bench_task

        key = job["task"]["key"]
        marker = markers / key.replace("/", "__")
        if key in always or (key in once and not marker.exists()):
            marker.touch()
            os._exit(9)
        return _bench_task(job)

    return task


def test_ray_with_logical_gpus_gives_the_local_pool_verdicts(scored, tmp_path: Path, harness_cache, monkeypatch):
    ray = pytest.importorskip("ray")
    from cuda_agent_cli.bench.ray_runner import RETRIES, RayPool
    from cuda_agent_cli.bench.run import BenchRequest, plan_bench

    out = scored[0]
    local = {r["task"]: r for r in lines(out / "results.jsonl")}
    plan = plan_bench(
        BenchRequest(
            suite="kernelbench",
            root=SUITE,
            out=tmp_path / "ray",
            device="cpu",
            solutions=SUITE / "runs",
            trials=5,
            levels="1",
            tasks="1-3",
        )
    )
    assert len(plan.jobs) == 3
    for job in plan.jobs:  # the local run's candidate folders: their builds are reused
        job["work"] = str(out / "work" / job["task"]["key"])
    markers = tmp_path / "markers"
    markers.mkdir()
    got: dict[str, dict] = {}
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        # The worker running level1/2 dies mid-task: the task runs again on a new worker.
        pool = RayPool(None, task=dying_worker(markers, once={"level1/2_ScaleShift"}, always=set()))
        pool.run_jobs(plan.jobs, lambda job, rec: got.setdefault(rec["task"], rec))
        # A task whose worker dies on every attempt is that task's error; the others still finish.
        doomed: dict[str, dict] = {}
        RayPool(None, task=dying_worker(markers, once=set(), always={"level1/3_RowSum"})).run_jobs(
            plan.jobs[1:], lambda job, rec: doomed.setdefault(rec["task"], rec)
        )
    finally:
        ray.shutdown()
    assert (markers / "level1__2_ScaleShift").is_file()  # it did die once
    assert sorted(got) == ["level1/1_ReLU", "level1/2_ScaleShift", "level1/3_RowSum"]
    assert {k: verdict(r) for k, r in got.items()} == {k: verdict(local[k]) for k in got}
    assert {r["gpu"] for r in got.values()} <= {"0", "1"}  # each task saw the one logical GPU Ray gave it
    assert verdict(doomed["level1/2_ScaleShift"]) == verdict(local["level1/2_ScaleShift"])
    dead = doomed["level1/3_RowSum"]
    assert dead["status"] == "error" and dead["correct"] is False
    assert f"the Ray worker died while running this task ({RETRIES + 1} attempts)" in dead["error"]


def _sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_keeps_finished_results(tmp_path: Path, harness_cache_root: Path):
    root = tmp_path / "suite" / "level1"
    runs = tmp_path / "runs"
    root.mkdir(parents=True)
    runs.mkdir()
    for k in (1, 2):
        (root / f"{k}_Relu{k}.py").write_text((SUITE / "KernelBench" / "level1" / "1_ReLU.py").read_text())
    (runs / "level_1_problem_1_sample_0_kernel.py").write_text(
        (SUITE / "runs" / "level_1_problem_3_sample_0_kernel.py").read_text()
    )
    # Task 2's candidate builds a C++ extension, which takes a while: the interrupt lands then.
    (runs / "level_1_problem_2_sample_0_kernel.py").write_text(
        (SUITE / "runs" / "level_1_problem_1_sample_0_kernel.py")
        .read_text()
        .replace("bench_suite_relu", "bench_ctrl_c")
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cuda_agent_cli",
            "bench",
            "--suite",
            "folder",
            "--root",
            str(tmp_path / "suite"),
            "--solutions",
            str(runs),
            "--device",
            "cpu",
            "--out",
            str(out),
            "--plain",
        ],
        env=env_for(tmp_path, harness_cache_root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it: a run started in the background by a shell without
        # job control inherits SIGINT ignored, and `bench` would rightly keep going.
        preexec_fn=_sigint_as_in_a_terminal,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not lines(out / "results.jsonl"):
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: finished results are kept" in err and "Traceback" not in err
    assert [r["task"] for r in lines(out / "results.jsonl")] == ["level1/1_Relu1"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and summary["finished"] == 1 and summary["selected"] == 2
    assert "(interrupted)" in (out / "report.md").read_text()
