"""The bench's own overhead per task: scheduling, workspace, bookkeeping, excluding the harness.

A generated suite of N tasks in KernelBench layout, each with a KernelBench-style candidate that
the harness turns down at its first (static) check, runs through the real path: plan (suite
loading and hashing, candidate discovery), the local pool's slot process, the candidate's
folder, one harness round per task, results.jsonl appended and fsynced, summary and reports.
The harness's own time (`harness_s` of each record, measured around its calls) is subtracted
from the time between consecutive records as the bench saw them.

    python benchmarks/bench_overhead.py --tasks 40
Goal: under 2 s per task.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * {k}.0


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
"""
CANDIDATE = """import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.mul({k}.0)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=40)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, runs = Path(tmp) / "KernelBench" / "level1", Path(tmp) / "runs"
        root.mkdir(parents=True)
        runs.mkdir()
        for k in range(1, args.tasks + 1):
            (root / f"{k}_Scale{k}.py").write_text(TASK.format(k=k))
            (runs / f"level_1_problem_{k}_sample_0_kernel.py").write_text(CANDIDATE.format(k=k))
        os.environ.setdefault("XDG_CACHE_HOME", str(Path(tmp) / "cache"))
        from cuda_agent_cli.bench.run import BenchRequest, finish, make_scheduler, plan_bench

        t0 = time.perf_counter()
        plan = plan_bench(
            BenchRequest(suite="kernelbench", root=Path(tmp), out=Path(tmp) / "out", device="cpu", solutions=runs)
        )
        t_plan = time.perf_counter() - t0
        scheduler = make_scheduler(plan)
        arrivals: list[tuple[float, dict]] = []

        def on_record(job: dict, record: dict) -> None:
            plan.store.append(record)
            arrivals.append((time.perf_counter(), record))

        t1 = time.perf_counter()
        scheduler.run_jobs(plan.jobs, on_record)
        t_run = time.perf_counter() - t1
        t2 = time.perf_counter()
        finish(plan)
        t_finish = time.perf_counter() - t2
    assert len(arrivals) == args.tasks and all(r["status"] == "failed" for _, r in arrivals)
    overheads, previous = [], t1
    for when, record in arrivals:
        overheads.append(when - previous - record["harness_s"])
        previous = when
    steady = overheads[1:]
    print(
        json.dumps(
            {
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
                "tasks": args.tasks,
                "plan_s": round(t_plan, 3),
                "first_task_overhead_s": round(overheads[0], 3),
                "per_task_overhead_s": {
                    "median": round(statistics.median(steady), 4),
                    "max": round(max(steady), 4),
                    "mean": round(statistics.fmean(steady), 4),
                },
                "harness_s_per_task_median": round(statistics.median(r["harness_s"] for _, r in arrivals), 4),
                "run_s": round(t_run, 2),
                "summary_and_reports_s": round(t_finish, 2),
                "goal_per_task_s": 2.0,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
