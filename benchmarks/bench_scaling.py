"""How the bench scales and how busy it keeps a GPU, over the project's suite (tests/bench_suite).

CPU with Ray (default): the harness-only bench of the suite on a local Ray instance with 2
logical GPUs against 1 (`ray.init(num_cpus=C, num_gpus=N)`), after one unmeasured run that pays
the suite's builds and baselines into a private cache; the measured runs reuse those candidate
folders, so they time scheduling and harness rounds, not compilers. Runs alternate 1, 2, 1, 2...;
each prints (stderr, and in the JSON's `runs`) the load before it (the 1-minute load average and
the cores other processes kept busy in the 3 s before) and where its wall time went: the wait
for the first task, and per GPU its seconds in tasks, in scoring rounds and idle at the end.

    python benchmarks/bench_scaling.py --repeats 2
Goal: 2 logical GPUs finish the suite in under 0.65x the time of 1.

GPU (`--gpu`): `cuda-agent bench --solutions` of the suite on one CUDA GPU (the CPU run's
adversarial candidates, the CUDA versions of the honest ones from runs_cuda/), as a user runs it,
while nvidia-smi samples the GPU's utilization every 200 ms. Prints the share of the run (first
task's start to last task's end) the GPU was busy: by nvidia-smi (utilization above 0) and by the
bench's own record of its scoring rounds (`device_busy`).

    python benchmarks/bench_scaling.py --gpu
Goal: the GPU busy at least 70% of the wall time (nvidia-smi's figure). Exit 1 when the bench
could not run (no GPU, a failed run, missing records); the goal's verdict is printed, not the
exit status.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "bench_suite"
sys.path.insert(0, str(ROOT))

RAY_GOAL = 0.65
# A round's stages and the phases of its jobs (the records' samples[].seconds); the timing
# phase includes the wait for the baselines.
PHASES = ("round", "inputs.job", "candidate", "candidate.baselines_wait", "candidate.timing", "judge")
GPU_GOAL = 0.70


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, load average {load}"


def other_work(seconds: float = 3.0) -> float | None:
    """Cores kept busy by other processes while this script waits (Linux: /proc/stat); the load
    average also counts this script's own previous run, which winds down for a while."""

    def jiffies() -> tuple[int, int]:
        with open("/proc/stat") as f:
            parts = [int(x) for x in f.readline().split()[1:]]
        return sum(parts) - parts[3] - parts[4], sum(parts)

    try:
        busy0, total0 = jiffies()
        time.sleep(seconds)
        busy1, total1 = jiffies()
    except OSError:
        return None
    return round((busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1), 2)


def ray_run(jobs: list[dict], gpus: int, cpus: int) -> tuple[float, dict[str, dict], dict]:
    """One run on a fresh local Ray instance: its wall time (Ray's start and stop left out), the
    records by task, and where the wall time went (see `spent`)."""
    import ray

    from cuda_agent_cli.bench.ray_runner import RayPool

    got: dict[str, dict] = {}
    others = other_work()
    load = os.getloadavg()[0]
    ray.init(num_cpus=cpus, num_gpus=gpus, include_dashboard=False, log_to_driver=False)
    try:
        start = time.time()
        # The local run's jobs say which slot ran them; here Ray's GPU does.
        fresh = [{k: v for k, v in j.items() if k != "gpu"} for j in jobs]
        RayPool(None).run_jobs(fresh, lambda job, rec: got.setdefault(rec["task"], rec))
        end = time.time()
        return (
            end - start,
            got,
            {"gpus": gpus, "load_1min_before": round(load, 2), "other_work_cores": others, **spent(got, start, end)},
        )
    finally:
        ray.shutdown()


def spent(records: dict[str, dict], start: float, end: float) -> dict:
    """Where a run's wall time went, from the records' spans: how long until the first task
    started (the workers' start), and per GPU the seconds it ran tasks, the seconds of those in
    scoring rounds, and the seconds it sat idle after its last task while another GPU worked."""
    from cuda_agent_cli.bench.timeline import union_seconds

    by_gpu: dict[str, list[dict]] = {}
    for r in records.values():
        by_gpu.setdefault(str(r.get("gpu")), []).append(r)
    first = min((r["held"][0] for r in records.values()), default=start)
    phases: dict[str, float] = {}
    for s in (s for r in records.values() for s in r.get("samples") or []):
        for k in PHASES:
            phases[k] = phases.get(k, 0.0) + float((s.get("seconds") or {}).get(k) or 0.0)
    return {
        "wall_s": round(end - start, 1),
        "first_task_after_s": round(first - start, 1),
        # Summed over every sample's round, whichever GPU ran it (they overlap with 2 GPUs).
        "rounds_sum_s": {k: round(v, 1) for k, v in phases.items()},
        "per_gpu": {
            g: {
                "tasks": len(rs),
                "in_tasks_s": round(union_seconds(r["held"] for r in rs), 1),
                "in_rounds_s": round(union_seconds(s for r in rs for s in r.get("device_busy") or []), 1),
                "idle_at_end_s": round(end - max(r["held"][1] for r in rs), 1),
            }
            for g, rs in sorted(by_gpu.items())
        },
    }


def verdicts(records: dict[str, dict]) -> dict[str, str]:
    return {k: r["status"] for k, r in sorted(records.items())}


def ray_cpu(args: argparse.Namespace) -> int:
    from cuda_agent_cli.bench.run import BenchRequest, plan_bench, run_bench

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        warm = plan_bench(
            BenchRequest(
                suite="kernelbench",
                root=SUITE,
                out=Path(tmp) / "warm",
                device="cpu",
                solutions=SUITE / "runs",
                trials=args.trials,
            )
        )
        t0 = time.perf_counter()
        local = {r["task"]: r for r in run_bench(warm).records}
        warm_s = time.perf_counter() - t0
        jobs = warm.jobs
        walls: dict[int, list[float]] = {1: [], 2: []}
        runs = []
        for _ in range(args.repeats):
            for n in (1, 2):
                wall, got, where = ray_run(jobs, n, args.cpus)
                runs.append(where)
                print(json.dumps(where), file=sys.stderr, flush=True)
                if verdicts(got) != verdicts(local):
                    print(
                        f"error: Ray with {n} GPU(s) gave other verdicts than the local pool: "
                        f"{verdicts(got)} vs {verdicts(local)}",
                        file=sys.stderr,
                    )
                    return 1
                walls[n].append(wall)
    one, two = statistics.median(walls[1]), statistics.median(walls[2])
    print(
        json.dumps(
            {
                "machine": machine(),
                "tasks": len(jobs),
                "trials": args.trials,
                "ray_cpus": args.cpus,
                "warm_up_local_s": round(warm_s, 1),
                "one_gpu_s": [round(w, 1) for w in walls[1]],
                "two_gpus_s": [round(w, 1) for w in walls[2]],
                "ratio_of_medians": round(two / one, 3),
                "runs": runs,
                "goal_ratio_under": RAY_GOAL,
            },
            indent=2,
        )
    )
    print(
        f"2 logical GPUs took {two / one:.2f}x the time of 1 ({two:.1f} s vs {one:.1f} s): goal < {RAY_GOAL}x "
        f"{'met' if two / one < RAY_GOAL else 'NOT met'}"
    )
    return 0


class Sampler:
    """nvidia-smi's utilization of one GPU every 200 ms, each sample stamped when it arrives."""

    def __init__(self, gpu: str) -> None:
        self.samples: list[tuple[float, int]] = []
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "200", "-i", gpu],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            if line.strip().isdigit():
                self.samples.append((time.time(), int(line.strip())))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        self.thread.join(timeout=5)

    def busy(self, start: float, end: float) -> tuple[float | None, int]:
        window = [u for t, u in self.samples if start <= t <= end]
        return (sum(1 for u in window if u > 0) / len(window) if window else None), len(window)


def gpu(args: argparse.Namespace) -> int:
    from cuda_agent_cli.bench.timeline import busy_fraction

    if shutil.which("nvidia-smi") is None:
        print("error: --gpu needs nvidia-smi and an NVIDIA GPU", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        runs = tmp / "runs"
        shutil.copytree(SUITE / "runs", runs)
        (runs / "level_2_problem_1_sample_1_kernel.py").unlink()  # replaced by the CUDA workdir
        shutil.copytree(SUITE / "runs_cuda", runs, dirs_exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_")}
        env.setdefault("XDG_CACHE_HOME", str(tmp / "cache"))
        results = []
        for run in range(args.runs):
            out = tmp / f"out{run}"
            sampler = Sampler(args.gpus.split(",")[0])
            start = time.time()
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
                        args.gpus,
                        "--out",
                        str(out),
                        "--plain",
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                    cwd=ROOT,
                )
            finally:
                sampler.stop()
            end = time.time()
            path = out / "results.jsonl"
            records = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []
            if proc.returncode not in (0, 1) or len(records) != 8:
                print(proc.stderr[-3000:], file=sys.stderr)
                print(
                    f"error: the bench did not run through (exit {proc.returncode}, {len(records)} of 8 records)",
                    file=sys.stderr,
                )
                return 1
            held = busy_fraction(records)
            lo = min(r["held"][0] for r in records)
            hi = max(r["held"][1] for r in records)
            smi, n = sampler.busy(lo, hi)
            smi_all, _ = sampler.busy(start, end)
            results.append(
                {
                    "run": run,
                    "gpu": records[0]["best"]["environment"]["gpu"] if records[0].get("best") else None,
                    "command_wall_s": round(end - start, 1),
                    "tasks_span_s": round(hi - lo, 1),
                    "busy_nvidia_smi_tasks_span": None if smi is None else round(smi, 3),
                    "samples": n,
                    "busy_nvidia_smi_command_wall": None if smi_all is None else round(smi_all, 3),
                    "busy_rounds_held": held["overall"],
                    "built_ahead": sorted(r["task"] for r in records if r.get("compile_ahead")),
                    "statuses": {r["task"]: r["status"] for r in records},
                }
            )
    print(json.dumps({"machine": machine(), "runs": results, "goal_busy_at_least": GPU_GOAL}, indent=2))
    for r in results:
        smi = r["busy_nvidia_smi_tasks_span"]
        verdict = "no nvidia-smi samples" if smi is None else ("met" if smi >= GPU_GOAL else "NOT met")
        print(
            f"run {r['run']}: GPU busy {'n/a' if smi is None else f'{100 * smi:.0f}%'} of the tasks' "
            f"{r['tasks_span_s']} s (nvidia-smi, {r['samples']} samples; scoring rounds held the GPU "
            f"{100 * r['busy_rounds_held']:.0f}%; whole command {r['command_wall_s']} s): goal >= "
            f"{100 * GPU_GOAL:.0f}% {verdict}"
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="measure the GPU-busy fraction on a CUDA GPU")
    ap.add_argument("--gpus", default="0", help="--gpu: the GPU(s) to run on (nvidia-smi samples the first)")
    ap.add_argument("--runs", type=int, default=1, help="--gpu: bench runs, each with a fresh --out")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--repeats", type=int, default=2, help="CPU: runs of each of 1 and 2 logical GPUs")
    ap.add_argument("--cpus", type=int, default=2, help="CPU: num_cpus of the Ray instance")
    ap.add_argument("--trials", type=int, default=5, help="CPU: timed calls per candidate")
    args = ap.parse_args()
    return gpu(args) if args.gpu else ray_cpu(args)


if __name__ == "__main__":
    sys.exit(main())
