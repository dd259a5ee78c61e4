"""The deployment probe beside busy programs: the speedup "as your Python calls it" and the
probe's CPU, idle and with spinning processes beside it.

With every core as torch's threads, one other busy program left the original forward's OpenMP
regions spinning at their barrier for a thread that had no core, and the probe read a speedup
many times the harness's. The probe now uses machine.cpu_timing_threads() on the CPU;
`--threads N` forces another count, to see the old behaviour (N = the machine's cores).

python benchmarks/deploy_busy.py DEMO_REPO [--spinners 0 1 2] [--threads N] [--runs 1] [--module vit_head]
(DEMO_REPO: a folder where `cuda-agent demo --device cpu --yes` applied its kernel.)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def _probe_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repo", type=Path)
    parser.add_argument("--spinners", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=None, help="torch's threads in the probe (default: its rule)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--module", default="vit_head", help="the module that defines the class (the demo's)")
    args = parser.parse_args()

    from cuda_agent_cli.machine import cpu_timing_threads, usable_cores
    from cuda_agent_cli.writeback import deploy

    if args.threads is not None:
        deploy.cpu_timing_threads = lambda: args.threads  # type: ignore[assignment]
    kernel_dirs = sorted((args.repo / "_cuda_agent").iterdir())
    if not kernel_dirs:
        raise SystemExit(f"{args.repo} has no applied kernel (_cuda_agent/ is empty)")
    folder = kernel_dirs[0]
    files = {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}
    verified = json.loads((folder / "verified.json").read_text())
    module, class_name = args.module, verified["class"]
    print(f"cores {usable_cores()}, probe threads {args.threads or cpu_timing_threads()}, kernel {folder.name}")
    for n in args.spinners:
        for _ in range(args.runs):
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
            try:
                cpu, start = _probe_cpu(), time.perf_counter()
                found = deploy.measure_deployment(
                    files, repo_root=args.repo, import_paths=[args.repo], module=module, class_name=class_name
                )
                wall, cpu = time.perf_counter() - start, _probe_cpu() - cpu
            finally:
                for p in spinners:
                    p.kill()
                    p.wait()
            first = found.first
            speedup = f"{first.speedup:.2f}x" if first and first.speedup else f"none ({found.error})"
            print(f"spinners {n}: speedup per call {speedup}, probe CPU {cpu:.1f} s, wall {wall:.1f} s")


if __name__ == "__main__":
    main()
