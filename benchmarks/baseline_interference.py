"""GPU work beside the baselines: what an honest kernel's profile shows of the device while the
baselines are timed, and what work left on the device by a candidate's process buys it.

Profiles, N times each, on CUDA: the honest twin gh_slow_relu, g_leave_work_behind (about 30 ms of
reading 1 GiB from every SM, queued past each reply, so the blocks timed next share the device's
memory and SMs with it) and g_busy_while_stopped (the same reading from each reply until the next
request reaches its process: the device is shared for exactly as long as the baselines are
timed). For
each profile it prints eager's time, the speedup against eager, the reward or the check that
failed, how many trusted blocks were made again, and the device ratios of the trusted blocks
(each block's median lead-in and flush against their calibrated times, the larger): what an
undisturbed device reads, which sets how slow a block may read before it is made again
(tools/controller.py, DEVICE_SLOW).

    python3 benchmarks/baseline_interference.py --gpu --runs 3
    PYTHONPATH=/path/to/an/older/tree python3 benchmarks/baseline_interference.py --gpu   # its harness

The candidates are always this tree's (tests/adversarial); the harness is whichever
cuda_agent_cli Python imports. Goals: the honest twin's trusted blocks are never made again, and
no trick reads more than 1.15 times its twin's speedup against eager. Exit 1 when one is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

TWIN = "gh_slow_relu"
TRICKS = ["g_leave_work_behind", "g_busy_while_stopped"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="run on CUDA (the only device this measures)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not args.gpu:
        print("this benchmark measures the CUDA device: pass --gpu", file=sys.stderr)
        return 2

    from adversarial.workspaces import Workspaces

    import cuda_agent_cli
    from cuda_agent_cli.harness import profile_path

    print(f"harness: {Path(cuda_agent_cli.__file__).parent}")
    ws = Workspaces(Path(tempfile.mkdtemp(prefix="interference-")), ROOT / "tests" / "adversarial" / "candidates_gpu")
    speedups: dict[str, list[float]] = {}
    honest_ratios: list[float] = []
    failures: list[str] = []
    print(
        "| candidate | eager us | kernel us | vs eager | reward or failed check | blocks made again | "
        "trusted device ratios (min / median / max) |"
    )
    print("|---|---|---|---|---|---|---|")
    for _ in range(args.runs):
        for name in [TWIN, *TRICKS]:
            result = profile_path(ws.materialize(name, "cuda_tricks"), device="cuda", static_checks=name == TWIN)
            failed = [c.name for c in result.checks if not c.passed]
            detail = result.timing_detail or {}
            retries = detail.get("trusted_retries") or []
            ratios = detail.get("trusted_device_ratios") or []
            spread = (
                f"{min(ratios):.3f} / {statistics.median(ratios):.3f} / {max(ratios):.3f}" if ratios else "not recorded"
            )
            t = result.timings
            if t is None:
                print(f"| {name} | | | | {', '.join(failed) or 'no timings'} | {len(retries)} | {spread} |")
                if name == TWIN:
                    failures.append(f"{TWIN} was not timed: {failed}")
                continue
            speedups.setdefault(name, []).append(t.speedup_vs_eager)
            print(
                f"| {name} | {t.eager_us:.1f} | {t.candidate_us:.1f} | {t.speedup_vs_eager:.2f}x | "
                f"{result.reward} | {len(retries)} | {spread} |",
                flush=True,
            )
            if name == TWIN:
                honest_ratios.extend(ratios)
                if retries:
                    failures.append(f"{TWIN}: {len(retries)} trusted block(s) made again ({retries})")
    twin = statistics.median(speedups.get(TWIN) or [float("nan")])
    for name in TRICKS:
        for s in speedups.get(name, []):
            if s > 1.15 * twin:
                failures.append(f"{name} read {s:.2f}x against eager, its twin {twin:.2f}x")
    if honest_ratios:
        print(
            f"\nhonest trusted blocks: {len(honest_ratios)}, device ratio median "
            f"{statistics.median(honest_ratios):.3f}, max {max(honest_ratios):.3f}"
        )
    for line in failures:
        print(f"MISSED: {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
