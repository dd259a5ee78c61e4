"""Null blocks on the CPU: what an honest process shows against the baselines' process, and what
a process stalling its null blocks to forge its claims is held to.

Profiles, N times each, the honest twins and the null-block tricks of tests/adversarial on the CPU
(one thread a side, the CPU-time bound): h_tanh_chain beside r_slow_null_blocks_heavy (a kernel
many times the harness's own work per call) and h_relu_destination beside r_slow_null_blocks
(a kernel below what the clock resolves), and h_fraction_positive alone (inputs large enough for
the cache sweep, whose null blocks wander most). For each profile it prints the kernel's time,
eager's, the harness's own work per call in the candidate's process (its null blocks) and in the
baselines' process, their ratio, how much each wanders from round to round, and whether the
result flagged the null blocks.

    python benchmarks/null_blocks.py --runs 3 [--busy 1]

--busy K runs K processes spinning on the CPU beside the profiles (other work on the machine).

Goals: an honest process is never flagged, and the heavy trick reads at least half its twin's
time. Exit 1 when one is missed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

PAIRS = [("h_tanh_chain", "r_slow_null_blocks_heavy"), ("h_relu_destination", "r_slow_null_blocks")]
HONEST_ALONE = ("h_fraction_positive",)
FLAG = "took far longer around calls that ran none of its code"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="processes spinning on the CPU beside the profiles")
    args = parser.parse_args()
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        return _profiles(args.runs)
    finally:
        for p in spinners:
            p.kill()


def _profiles(runs: int) -> int:

    from adversarial.workspaces import Workspaces  # the test suite's candidates, as written there

    from cuda_agent_cli.harness import profile_path

    ws = Workspaces(Path(tempfile.mkdtemp(prefix="null-blocks-")), ROOT / "tests" / "adversarial" / "candidates")
    kernels = {name: "cpu_honest" for name in ("h_tanh_chain", "h_relu_destination", *HONEST_ALONE)}
    times: dict[str, list[float]] = {}
    failures: list[str] = []
    print(
        "| candidate | kernel us | eager us | harness work per call, candidate / baselines' process (us) "
        "| ratio | wander, candidate / baselines' process (us) | flagged |"
    )
    print("|---|---|---|---|---|---|---|")
    for _ in range(runs):
        for group in (*PAIRS, HONEST_ALONE):
            for name in group:
                honest = name in kernels
                result = profile_path(
                    ws.materialize(name, kernels.get(name, "cpu_process_tricks")), device="cpu", static_checks=honest
                )
                if result.timings is None:
                    failures.append(f"{name}: no timings ({[c.name for c in result.checks if not c.passed]})")
                    continue
                d = result.timing_detail or {}
                cand_null = _null_cpu(d, "null")
                base_null = _null_cpu(d, "base_null")
                flagged = any(FLAG in w for w in result.warnings)
                times.setdefault(name, []).append(result.timings.candidate_us)
                ratio = f"{cand_null / base_null:.2f}" if cand_null and base_null else "-"
                print(
                    f"| {name} | {result.timings.candidate_us:.1f} | {result.timings.eager_us:.1f} "
                    f"| {cand_null:.0f} / {base_null:.0f} | {ratio} "
                    f"| {d.get('cpu_null_wander_us', 0):.0f} / {d.get('trusted_cpu_wander_us', 0):.0f} "
                    f"| {'yes' if flagged else 'no'} |",
                    flush=True,
                )
                if honest and flagged:
                    failures.append(f"{name} (honest) was flagged")
    twin, trick = PAIRS[0]
    if times.get(twin) and times.get(trick):
        share = statistics.median(times[trick]) / statistics.median(times[twin])
        print(f"\n{trick} reads {share:.2f} of its twin's time (goal: at least 0.5)")
        if share < 0.5:
            failures.append(f"{trick} read {share:.2f} of its twin's time")
    for line in failures:
        print("missed:", line)
    return 1 if failures else 0


def _null_cpu(detail: dict, side: str) -> float:
    """A side's null blocks' CPU time per call beyond their calls' own (µs), from the detail."""
    block = detail.get(side) or {}
    per_call, events = block.get("cpu_per_call_us"), block.get("events_us")
    return float(per_call) - float(events) if per_call is not None and events is not None else 0.0


if __name__ == "__main__":
    raise SystemExit(main())
