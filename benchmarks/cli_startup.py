"""Wall time of `cuda-agent --help` (median of N runs) and the heavy modules it imports.

Usage: python benchmarks/cli_startup.py [--runs 5]
Goal (docs/benchmarks.md): under 0.3 s median on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    exe = shutil.which("cuda-agent")
    cmd = [exe, "--help"] if exe else [sys.executable, "-m", "cuda_agent_cli", "--help"]
    subprocess.run(cmd, capture_output=True, check=True)  # warm the OS file cache once
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv=['cuda-agent','--help']\n"
            "from cuda_agent_cli import cli\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            "print('HEAVY:' + ','.join(m for m in ('torch','litellm','textual','git') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    heavy = next(ln for ln in probe.stdout.splitlines() if ln.startswith("HEAVY:"))[len("HEAVY:") :]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        f"cuda-agent --help: median {statistics.median(times) * 1000:.0f} ms over {args.runs} runs "
        f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f})"
    )
    print(f"heavy modules imported: {heavy or 'none'}")
    return 0 if statistics.median(times) < 0.3 and not heavy else 1


if __name__ == "__main__":
    sys.exit(main())
