"""The bench's compile pool on a generated suite of single-file solutions (benchmarks/pool_suite.py).

CPU (default): `cuda-agent bench --solutions` of one task, then of four tasks, each from a fresh
cache (nothing built before), as a user runs it; prints both wall times and their ratio, with and
without compile-ahead builders (`--builders 1` against `--builders 0`).

    python benchmarks/bench_pool.py
Goal: the 4-task suite in at most 2.6 times the time of one task (one at a time is about 4x).

GPU (`--gpu`): the bench of a 40-task suite of CUDA solutions on one GPU from a fresh cache: the
wall time and the share of it the GPU spent timing (summary.json's `utilization`).

    python benchmarks/bench_pool.py --gpu --tasks 40
Goals: at most 10 minutes for 40 solutions on one H200 (16 cores); the GPU's timing share at
least 70%.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from pool_suite import write_suite  # noqa: E402

CPU_GOAL = 2.6
GPU_GOALS = {"wall_s": 600.0, "timing_share": 0.70}


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, load average {load}"


def run_bench(
    suite: Path, device: str, tasks: str, builders: int | None, work: Path, deadline: float | None = None
) -> dict:
    """One `cuda-agent bench` from a fresh cache; its wall time and summary."""
    out = work / "out"
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cmd = [
        sys.executable, "-m", "cuda_agent_cli", "bench", "--root", str(suite), "--solutions", str(suite / "runs"),
        "--device", device, "--tasks", tasks, "--out", str(out), "--plain",
    ]  # fmt: skip
    if builders is not None:
        cmd += ["--builders", str(builders)]
    start = time.perf_counter()
    results = out / "results.jsonl"
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
        cut = False
        while proc.poll() is None:
            # Progress now and then, so that a run cut short by its caller still says how far it got.
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                done = len(results.read_text().splitlines()) if results.is_file() else 0
                elapsed = time.perf_counter() - start
                print(f"  {elapsed:.0f} s: {done} tasks done", file=sys.stderr, flush=True)
                if deadline and elapsed > deadline:
                    proc.terminate()
                    cut = True
        proc.wait()
        err.seek(0)
        stderr = err.read()
    wall = time.perf_counter() - start
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() else {}
    records = (
        [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        if (out / "results.jsonl").is_file()
        else []
    )
    return {
        "wall_s": round(wall, 1),
        "exit": proc.returncode,
        "cut_at_deadline": cut,
        "correct": sum(1 for r in records if r.get("correct")),
        "tasks": len(records),
        "utilization": summary.get("utilization"),
        "errors": [r.get("error") for r in records if not r.get("correct")][:3],
        "stderr_tail": stderr[-600:] if proc.returncode not in (0, 1) else "",
    }


def cpu(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as tmp:
        suite = Path(tmp) / "suite"
        write_suite(suite, "cpu", 4)
        found: dict = {"machine": machine(), "runs": {}}
        for builders in args.builders:
            one = run_bench(suite, "cpu", "1", builders, Path(tmp) / f"one-{builders}")
            four = run_bench(suite, "cpu", "1-4", builders, Path(tmp) / f"four-{builders}")
            ratio = four["wall_s"] / one["wall_s"] if one["wall_s"] else None
            found["runs"][f"builders={builders}"] = {"one": one, "four": four, "ratio": round(ratio or 0, 3)}
            print(
                f"builders {builders}: one task {one['wall_s']} s ({one['correct']}/{one['tasks']} correct), "
                f"four tasks {four['wall_s']} s ({four['correct']}/{four['tasks']} correct): "
                f"{ratio:.2f}x (goal <= {CPU_GOAL})",
                file=sys.stderr,
            )
        return found


def gpu(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as tmp:
        suite = Path(tmp) / "suite"
        write_suite(suite, "cuda", args.tasks)
        run = run_bench(suite, "cuda", f"1-{args.tasks}", None, Path(tmp) / "run", args.deadline)
        share = (run.get("utilization") or {}).get("device_timing_share_overall")
        print(
            f"{args.tasks} solutions: {run['wall_s']} s ({run['correct']} correct), GPU timing share {share} "
            f"(goals: <= {GPU_GOALS['wall_s']:.0f} s, >= {GPU_GOALS['timing_share']:.0%})",
            file=sys.stderr,
        )
        return {"machine": machine(), "tasks": args.tasks, "run": run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--builders", type=int, nargs="+", default=[0, 1])
    parser.add_argument(
        "--deadline", type=float, default=None, help="stop the bench after this many seconds and report how far it got"
    )
    args = parser.parse_args()
    print(json.dumps(gpu(args) if args.gpu else cpu(args), indent=2))


if __name__ == "__main__":
    main()
