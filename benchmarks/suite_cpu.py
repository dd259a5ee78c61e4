"""Where the test suite's time and CPU go, per test and per file.

A pytest plugin records, for every test, its wall time and the CPU seconds the whole machine
spent meanwhile (from /proc/stat: the harness's workers, compilers and the commands a test
starts are not children pytest waits for, so its own rusage would miss them). Run it serially
on an otherwise idle machine; with xdist workers the CPU of the tests running beside each other
is counted in both.

Usage:
  PYTHONPATH=benchmarks python -m pytest -p suite_cpu        # writes suite_cpu.jsonl here
  python benchmarks/suite_cpu.py suite_cpu.jsonl [--top 25]  # the report
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

_OUT = os.environ.get("SUITE_CPU_OUT", "suite_cpu.jsonl")


def busy_seconds() -> float:
    """CPU seconds spent by every process on this machine since boot (all cores)."""
    from cuda_agent_cli.bench.timeline import cpu_times

    times = cpu_times()
    if times is None:
        raise SystemExit("the machine's CPU time is read from /proc/stat (Linux), which is not readable here")
    return times[0] / os.sysconf("SC_CLK_TCK")


try:
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
        start, cpu = time.time(), busy_seconds()
        yield
        row = {"id": item.nodeid, "start": start, "wall": time.time() - start, "cpu": busy_seconds() - cpu}
        # Which xdist worker ran it: where each worker's last test ended shows how evenly the
        # files were shared out.
        row["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "")
        with open(_OUT, "a") as f:
            f.write(json.dumps(row) + "\n")

except ImportError:  # the report needs no pytest
    pass


def report(path: Path, top: int) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    wall = sum(r["wall"] for r in rows)
    cpu = sum(r["cpu"] for r in rows)
    out = [f"{len(rows)} tests: {wall:.0f} s of wall time, {cpu:.0f} s of CPU ({cpu / max(wall, 1e-9):.2f} cores)"]
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = files[r["id"].split("::")[0]]
        f[0] += r["wall"]
        f[1] += r["cpu"]
        f[2] += 1
    out.append("\nwall s   CPU s  tests  file")
    for name, (w, c, n) in sorted(files.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append(f"{w:6.1f} {c:7.1f} {int(n):6d}  {name}")
    out.append("\nwall s   CPU s  test")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        out.append(f"{r['wall']:6.1f} {r['cpu']:7.1f}  {r['id']}")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", type=Path)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    print(report(args.jsonl, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
