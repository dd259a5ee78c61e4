"""The local pool: one slot process per GPU, each seeing only its GPU; a slot that dies is
restarted and its task tried once more. Stand-in slot processes keep this fast."""

import itertools
import sys
import textwrap
import threading
from pathlib import Path

from cuda_agent_cli.bench.local_pool import ATTEMPTS, LocalPool

FAKE_SLOT = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    for line in sys.stdin:
        job = json.loads(line)
        marker = Path(job["work"]) / "attempted"
        if job.get("die") == "always" or (job.get("die") == "once" and not marker.exists()):
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            os._exit(9)
        time.sleep(job.get("sleep", 0))
        print(json.dumps({"task": job["task"]["key"], "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
                          "pid": os.getpid()}), flush=True)
""")


def job(tmp: Path, key: str, **extra) -> dict:
    task = {"key": key, "level": 1, "problem_id": 1, "name": key, "source": "", "origin": "", "sha256": "h"}
    return {"task": task, "mode": "solutions", "work": str(tmp / key), **extra}


def run(tmp: Path, gpus, jobs) -> list[dict]:
    script = tmp / "slot.py"
    script.write_text(FAKE_SLOT)
    got: list[dict] = []
    lock = threading.Lock()

    def on_record(j: dict, rec: dict) -> None:
        with lock:
            got.append(rec)

    LocalPool(gpus, tmp / "logs", command=[sys.executable, str(script)]).run_jobs(jobs, on_record)
    return got


def test_each_slot_sees_only_its_gpu_and_runs_one_task_at_a_time(tmp_path: Path):
    jobs = [job(tmp_path, f"t{i}", sleep=0.3) for i in range(6)]
    got = run(tmp_path, ["0", "1"], jobs)
    assert sorted(r["task"] for r in got) == [f"t{i}" for i in range(6)]
    by_gpu: dict[str, set] = {}
    for r in got:
        by_gpu.setdefault(r["gpu"], set()).add(r["pid"])
    # Both GPUs were used, each by one long-lived slot process that saw only that GPU.
    assert set(by_gpu) == {"0", "1"} and all(len(p) == 1 for p in by_gpu.values())


def test_a_dead_slot_is_restarted_and_the_task_tried_again(tmp_path: Path):
    got = run(
        tmp_path,
        [None],
        [job(tmp_path, "flaky", die="once"), job(tmp_path, "doomed", die="always"), job(tmp_path, "fine")],
    )
    recs = {r["task"]: r for r in got}
    assert recs["flaky"].get("gpu") is None and "error" not in recs["flaky"]
    assert recs["doomed"]["status"] == "error" and f"({ATTEMPTS} attempts)" in recs["doomed"]["error"]
    assert "pid" in recs["fine"]  # the run went on after the task that kept killing its worker


TIMED_SLOT = textwrap.dedent("""
    import json, os, sys, time
    for line in sys.stdin:
        job = json.loads(line)
        start = time.time()
        if job.get("stage") == "prebuild":
            time.sleep(job["build_s"])
            print(json.dumps({"compile_ahead": {"start": start, "end": time.time(), "nice": os.nice(0),
                                                "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}}), flush=True)
            continue
        time.sleep(job["time_s"])
        print(json.dumps({"task": job["task"]["key"], "held": [start, time.time()],
                          "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}), flush=True)
""")


def buildable_job(tmp: Path, key: str, **extra) -> dict:
    sample = {"index": 0, "kind": "workdir", "files": {"model_new.py": "", "kernels/k.cu": ""}}
    return job(tmp, key, samples=[sample], **extra)


def test_builds_of_queued_tasks_overlap_the_timing_and_no_task_is_timed_while_it_builds(tmp_path: Path):
    script = tmp_path / "slot.py"
    script.write_text(TIMED_SLOT)
    jobs = [buildable_job(tmp_path, f"t{i}", build_s=0.3, time_s=0.6) for i in range(4)]
    jobs.insert(2, job(tmp_path, "inline", time_s=0.2))  # a load_inline candidate: nothing to build
    got: dict[str, dict] = {}
    pool = LocalPool(["0"], tmp_path / "logs", command=[sys.executable, str(script)], builders=1, build_gpu="")
    pool.run_jobs(jobs, lambda j, rec: got.setdefault(rec["task"], rec))
    assert sorted(got) == ["inline", "t0", "t1", "t2", "t3"]
    # The slot's first task was taken at once; most other buildable tasks were built ahead, on a
    # niced process that saw no GPU, while the slot was timing another task.
    first = min(got.values(), key=lambda r: r["held"][0])
    assert "compile_ahead" not in first and "compile_ahead" not in got["inline"]
    ahead = {k: r["compile_ahead"] for k, r in got.items() if "compile_ahead" in r}
    assert len(ahead) >= 2, got
    assert all(a["gpu"] == "" and a["nice"] >= 10 for a in ahead.values())
    spans = sorted(r["held"] for r in got.values())
    for k, a in ahead.items():
        assert got[k]["held"][0] >= a["end"]  # never timed while its build was running
        # built while the slot was timing another task
        assert any(r["held"][0] < a["end"] and a["start"] < r["held"][1] for o, r in got.items() if o != k)
    # One slot: its tasks ran one at a time.
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert {r["gpu"] for r in got.values()} == {"0"}


def test_no_builds_ahead_when_a_slot_is_idle(tmp_path: Path):
    script = tmp_path / "slot.py"
    script.write_text(TIMED_SLOT)
    jobs = [buildable_job(tmp_path, f"t{i}", build_s=0.1, time_s=0.3) for i in range(2)]
    got: dict[str, dict] = {}
    LocalPool(["0", "1"], tmp_path / "logs", command=[sys.executable, str(script)], builders=1).run_jobs(
        jobs, lambda j, rec: got.setdefault(rec["task"], rec)
    )
    # Two slots, two tasks: each slot took one straight away and built it itself.
    assert sorted(got) == ["t0", "t1"] and not any("compile_ahead" in r for r in got.values())


def test_tasks_start_longest_expected_first_and_ties_keep_the_suite_order(tmp_path: Path):
    def sampled(key: str, n: int) -> dict:
        return job(tmp_path, key, samples=[{"index": i, "kind": "kernelbench", "files": {}} for i in range(n)])

    broken = sampled("broken", 3)
    broken["task"]["error"] = "the task file does not parse"
    jobs = [job(tmp_path, "none"), sampled("one", 1), broken, sampled("two", 2), sampled("one_b", 1)]
    # One slot runs them one after another, so the records come back in the order they started:
    # most candidates to score first; a task that did not load, or has no candidate, costs nothing.
    assert [r["task"] for r in run(tmp_path, [None], jobs)] == ["two", "one", "one_b", "none", "broken"]


def _buildable_job(k: int) -> dict:
    return {
        "mode": "solutions",
        "task": {"name": f"t{k}"},
        "samples": [{"index": 0, "files": {"kernels/k.cu": "x"}}],
    }


def test_a_gpu_run_gets_builders_for_the_cores_and_memory_the_slots_leave():
    from cuda_agent_cli.bench.local_pool import build_jobs, default_builders

    jobs = [_buildable_job(k) for k in range(40)]
    # One GPU on 16 cores with plenty of memory: seven builders of two compilers each, two cores left to the slot.
    assert default_builders("cuda", 1, jobs, cores=16, memory_gib=120) == 7
    assert build_jobs(7, 1, cores=16) == 2
    # Memory bounds them where it is short; the jobs to build bound them too; at least one always.
    assert default_builders("cuda", 1, jobs, cores=16, memory_gib=10) == 2
    assert default_builders("cuda", 1, jobs[:3], cores=64, memory_gib=500) == 3
    assert default_builders("cuda", 8, jobs, cores=16, memory_gib=500) == 1
    # None on the CPU (a build would take the timed cores), none with nothing to build.
    assert default_builders("cpu", 1, jobs, cores=16, memory_gib=120) == 0
    assert default_builders("cuda", 1, [{"mode": "agent", "task": {}}], cores=16, memory_gib=120) == 0
