"""Harness work around each call on the CPU: what honest candidates' processes show, against the
rule that fails a process which skipped part of that work (harness/clock_stats.py, SKIPPED_*_SHARE).

Profiles every honest candidate of tests/adversarial once per run on the CPU (one thread a side,
the CPU-time clock) and prints, from the timing detail, the CPU time the candidate's process spent
around each timed call and around each null call (a call of the harness's stand-in), and what
the baselines' process spent around the same null calls. A process whose null calls show less
than 0.6 times the baselines' process's, or whose timed calls show less than 0.8 times its own
null calls, fails `harness_integrity`: the cache sweep before a call, or other work of the
harness's, was skipped there.

    python benchmarks/harness_work.py --runs 2

Goal: every honest profile passes, with its ratios clear of the rule's. Exit 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()

    from adversarial.manifest import HONEST
    from adversarial.workspaces import Workspaces

    from cuda_agent_cli.harness import profile_path
    from cuda_agent_cli.harness.clock_stats import SKIPPED_NULL_SHARE, SKIPPED_REAL_SHARE

    ws = Workspaces(Path(tempfile.mkdtemp(prefix="harness-work-")), ROOT / "tests" / "adversarial" / "candidates")
    failures: list[str] = []
    lowest = {"timed": float("inf"), "null": float("inf")}
    print(
        "| candidate | around timed calls (us) | around null calls | baselines' null calls | timed / null "
        "| null / baselines' | result |"
    )
    print("|---|---|---|---|---|---|---|")
    for _ in range(args.runs):
        for case in HONEST:
            result = profile_path(ws.materialize(case.name, case.kernels), device="cpu", policy=case.policy)
            d = result.timing_detail or {}
            timed, null, base = (
                d.get("cpu_around_timed_us"),
                d.get("cpu_around_null_us"),
                d.get("trusted_cpu_overhead_us"),
            )
            failed = [c.name for c in result.checks if not c.passed]
            if result.timings is None or None in (timed, null, base):
                failures.append(f"{case.name}: not timed on the CPU-time clock ({failed or 'no detail'})")
                print(f"| {case.name} | | | | | | {', '.join(failed) or 'no detail'} |")
                continue
            r_timed, r_null = timed / null if null else float("inf"), null / base if base else float("inf")
            lowest["timed"], lowest["null"] = min(lowest["timed"], r_timed), min(lowest["null"], r_null)
            print(
                f"| {case.name} | {timed:.0f} | {null:.0f} | {base:.0f} | {r_timed:.2f} | {r_null:.2f} | "
                f"{'reward ' + str(result.reward) if result.correct else 'FAILED ' + ', '.join(failed)} |",
                flush=True,
            )
            if not result.correct:
                failures.append(f"{case.name}: {failed}")
    print(
        f"\nlowest timed / null {lowest['timed']:.2f} (the rule: {SKIPPED_REAL_SHARE}), lowest null / baselines' "
        f"{lowest['null']:.2f} (the rule: {SKIPPED_NULL_SHARE})"
    )
    for line in failures:
        print("missed:", line)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
