"""The local pool: one slot process per GPU, each seeing only its GPU; a slot that dies is
restarted and its task tried once more. Stand-in slot processes keep this fast."""

import sys
import textwrap
import threading
from pathlib import Path

from cuda_agent_cli.bench.runner import ATTEMPTS, LocalPool

FAKE_SLOT = textwrap.dedent('''
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
''')


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
    got = run(tmp_path, [None], [job(tmp_path, "flaky", die="once"), job(tmp_path, "doomed", die="always"),
                                 job(tmp_path, "fine")])
    recs = {r["task"]: r for r in got}
    assert recs["flaky"].get("gpu") is None and "error" not in recs["flaky"]
    assert recs["doomed"]["status"] == "error" and f"({ATTEMPTS} attempts)" in recs["doomed"]["error"]
    assert "pid" in recs["fine"]   # the run went on after the task that kept killing its worker
