"""Overhead of one sandboxed Bash call: the Bash tool running `true` under bubblewrap, against
the same command in a plain subprocess.

Usage: python benchmarks/sandbox_overhead.py [--runs 200]
Goal (docs/benchmarks.md): median overhead under 30 ms. Exit 1 when missed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cuda_agent_cli.actions import ActionContext, make_toolbox
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, probe


def _median_ms(fn, runs: int) -> tuple[float, float, float]:
    for _ in range(5):  # warm caches
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[0], times[int(len(times) * 0.95) - 1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    status = probe()
    if not status.available:
        print(f"bubblewrap unusable: {status.detail}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "kernels").mkdir(parents=True)
        for name in ("model.py", "binding.cpp", "binding_registry.h", "SKILL.md", "model_new.py"):
            (ws / name).write_text("#\n")
        sb = Sandbox(SandboxPolicy.optimize(ws, ["model.py", "binding.cpp", "binding_registry.h", "SKILL.md"]))
        sb.prepare()
        tb = make_toolbox(ActionContext(sb))

        def sandboxed() -> None:
            r = tb.call("Bash", {"command": "true"})
            assert not r.is_error, r.output

        def plain() -> None:
            subprocess.run(
                ["/bin/bash", "-c", "true"],
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=ws,
            )

        sb_med, sb_min, sb_p95 = _median_ms(sandboxed, args.runs)
        pl_med, pl_min, pl_p95 = _median_ms(plain, args.runs)
        tb.close()
    overhead = sb_med - pl_med
    mode = f"uid {sb.policy.sandbox_uid} inside" if sb.policy.sandbox_uid is not None else "caller's uid"
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{status.bwrap} ({mode})"
    )
    print(
        f"Bash tool under bubblewrap: median {sb_med:.1f} ms (min {sb_min:.1f}, p95 {sb_p95:.1f}) over {args.runs} runs"
    )
    print(f"plain subprocess bash -c true: median {pl_med:.1f} ms (min {pl_min:.1f}, p95 {pl_p95:.1f})")
    print(f"sandbox overhead: {overhead:.1f} ms median (goal < 30 ms)")
    return 0 if overhead < 30 else 1


if __name__ == "__main__":
    sys.exit(main())
