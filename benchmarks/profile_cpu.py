"""The CPU a whole `cuda-agent profile` costs the machine, not only its wall time: on a 2-core
machine (CI, the test suite) every second of CPU the harness spends around the timed calls
(workers importing torch, the baselines' torch.compile, digests) is a second no other work has.

Usage: python benchmarks/profile_cpu.py [DIR] [--runs 3]
  DIR: a CUDA-Agent workdir or KernelBench pair (default: the bench suite's ReLU and its
  single-file load_inline solution, copied to a temporary folder as model.py and model_new.py). The machine-wide CPU time comes from /proc/stat (Linux), so run
  it on an otherwise idle machine.
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
import time
from pathlib import Path

from suite_cpu import busy_seconds  # beside this script

SUITE = Path(__file__).resolve().parents[1] / "tests" / "bench_suite"
# A KernelBench pair: the suite's ReLU and a single-file solution that builds with load_inline.
DEFAULT_REFERENCE = SUITE / "KernelBench" / "level1" / "1_ReLU.py"
DEFAULT_CANDIDATE = SUITE / "runs" / "level_1_problem_1_sample_0_kernel.py"


def one(workdir: Path, env: dict[str, str]) -> dict[str, float]:
    cpu0, wall0 = busy_seconds(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "profile", str(workdir), "--device", "cpu", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall, cpu = time.perf_counter() - wall0, busy_seconds() - cpu0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"profile failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    reward = json.loads(proc.stdout).get("reward")
    return {"wall_s": wall, "cpu_s": cpu, "reward": reward}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workdir", nargs="?", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cuda-agent-profile-cpu-") as tmp:
        workdir = args.workdir
        if workdir is None:
            workdir = Path(tmp) / "workdir"
            workdir.mkdir()
            shutil.copy(DEFAULT_REFERENCE, workdir / "model.py")
            shutil.copy(DEFAULT_CANDIDATE, workdir / "model_new.py")
        env = dict(os.environ)
        env.setdefault("XDG_CACHE_HOME", str(Path(tmp) / "cache"))
        env.setdefault("CUDA_AGENT_INLINE_DIR", str(Path(tmp) / "inline"))  # built once, by the first run
        one(workdir, env)  # the first builds the kernel and fills torch.compile's caches
        runs = [one(workdir, env) for _ in range(args.runs)]
    print(
        json.dumps(
            {
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "workdir": str(args.workdir or f"{DEFAULT_REFERENCE.name} with {DEFAULT_CANDIDATE.name}"),
                "runs": runs,
                "wall_s_median": round(statistics.median(r["wall_s"] for r in runs), 2),
                "cpu_s_median": round(statistics.median(r["cpu_s"] for r in runs), 2),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
