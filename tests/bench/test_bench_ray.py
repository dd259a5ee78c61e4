"""`--ray` scheduling on a local Ray instance with 2 logical GPUs, with stand-in task bodies (the
bench's own task body on the project's suite is in test_bench_cpu.py)."""

import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ray = pytest.importorskip("ray")

from cuda_agent_cli.bench.ray_runner import RayPool  # noqa: E402


@pytest.fixture(scope="module")
def two_gpus():
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def stand_in(seconds: float):
    """A task body that takes `seconds` and says which process and GPU ran it."""

    def task(job: dict) -> dict:
        import os
        import time

        start = time.time()
        time.sleep(seconds)
        if job.get("fatal"):
            return {"fatal": {"exit": 3, "message": "no compiler"}, "task": job["task"]["key"]}
        return {
            "task": job["task"]["key"],
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pid": os.getpid(),
            "held": [start, time.time()],
        }

    return task


def job(key: str, samples: int = 1, **extra) -> dict:
    task = {"key": key, "level": 1, "problem_id": 1, "name": key, "source": "", "origin": "", "sha256": "h"}
    return {"task": task, "mode": "solutions", "samples": [{"index": i} for i in range(samples)], **extra}


def run(jobs: list[dict], seconds: float = 0.2) -> list[dict]:
    got: list[dict] = []
    RayPool(None, task=stand_in(seconds)).run_jobs(jobs, lambda j, rec: got.append(rec))
    return got


def test_each_logical_gpu_keeps_one_worker_process_for_all_its_tasks(two_gpus):
    got = run([job(f"t{i}") for i in range(6)])
    assert sorted(r["task"] for r in got) == [f"t{i}" for i in range(6)]
    pids: dict[str, set] = {}
    for r in got:
        pids.setdefault(r["gpu"], set()).add(r["pid"])
    # Both GPUs did work, each through one process that saw only its GPU (so the harness's
    # worker it started for the first task was warm for the others).
    assert set(pids) == {"0", "1"} and all(len(p) == 1 for p in pids.values())
    # One task at a time per GPU.
    for gpu in pids:
        spans = sorted(r["held"] for r in got if r["gpu"] == gpu)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_a_gpu_held_by_other_work_holds_no_task_back(two_gpus, tmp_path: Path):
    @ray.remote(num_gpus=1)
    class Holder:
        def gpu(self) -> str:
            import os

            return os.environ["CUDA_VISIBLE_DEVICES"]

    holder = Holder.remote()
    held = ray.get(holder.gpu.remote())
    try:
        start = time.monotonic()
        got = run([job(f"t{i}") for i in range(3)])
        # The pool's second actor never got a GPU; every task ran on the free one, and the run
        # ended when they were done rather than waiting for the GPU that stayed taken.
        assert sorted(r["task"] for r in got) == ["t0", "t1", "t2"]
        assert {r["gpu"] for r in got} == {"1" if held == "0" else "0"}
        assert time.monotonic() - start < 60
    finally:
        ray.kill(holder)


def test_longest_first_and_a_fatal_record_stops_the_run(two_gpus):
    jobs = [job("short_a"), job("short_b"), job("long", samples=3), job("none", samples=0)]
    got = run(jobs, seconds=0.5)
    # Two GPUs: the long task is among the first two taken, the task with nothing to score last.
    firsts = sorted(got, key=lambda r: r["held"][0])
    assert {r["task"] for r in firsts[:2]} == {"long", "short_a"} and firsts[-1]["task"] == "none"
    stopped = run([job("broken", samples=3, fatal=True), *(job(f"t{i}") for i in range(6))], seconds=0.5)
    # The environment is missing something: the run stops at that record, most tasks never ran.
    assert "fatal" in stopped[-1] and len(stopped) <= 3
