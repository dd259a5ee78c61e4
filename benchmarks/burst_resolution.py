"""Whether the harness's clock resolves short kernels, with and without bursts.

Profiles each task's honest kernel `--runs` times with bursts off (the window alone) and on
(the window, then bursts of back-to-back calls timed from outside; tools/timing.py), and prints,
per profile: the reward, the claim, whether the kernel was resolved, what the window's and the
bursts' clocks saw beyond the harness's own work against what they cannot tell apart, the
bursts' bound and the calls they checked.

    python benchmarks/burst_resolution.py --gpu            # axpby and gemm_epilogue on CUDA
    python benchmarks/burst_resolution.py --device cpu     # axpby as a C++ kernel (bursts forced on)

Goal (CUDA): every honest profile resolved, reward unchanged by the bursts' bound (no block held).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness_tasks import TASKS, make_task_workspace  # noqa: E402

KEYS = (
    "below_resolution",
    "window_below_resolution",
    "outside_us",
    "resolution_us",
    "burst_outside_us",
    "burst_resolution_us",
    "burst_bound_us",
    "burst_null_us",
    "burst_null_capped",
    "burst_calls",
    "clamped_blocks",
)


def profile(harness) -> dict:
    start = time.perf_counter()
    result = harness.profile()
    t = result.timings
    detail = result.timing_detail or {}
    return {
        "seconds": round(time.perf_counter() - start, 2),
        "correct": result.correct,
        "reward": result.reward,
        "candidate_us": round(t.candidate_us, 2) if t else None,
        "vs_eager": round(t.speedup_vs_eager, 3) if t else None,
        "vs_compile": round(t.speedup_vs_compile, 3) if t else None,
        "uncertain": bool(t and t.uncertain),
        **{k: detail.get(k) for k in KEYS},
        "burst_checks": ((detail.get("detection") or {}).get("bursts") or {}).get("checked"),
        "warnings": [w[:200] for w in result.warnings if "timing_bound" in w],
    }


def run_task(name: str, device: str, runs: int) -> list[dict]:
    from cuda_agent_cli.harness import Harness

    rows = []
    with tempfile.TemporaryDirectory(prefix="burst-resolution-") as tmp:
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        ws = make_task_workspace(name, Path(tmp) / "session", device)
        compiled = Harness(ws, device=device).compile()
        if not compiled.compiled:
            raise SystemExit(f"{name}: {compiled.summary()}")
        for bursts in (0, 8):
            harness = Harness(ws, device=device, bursts=bursts)
            for run in range(runs):
                row = {"task": name, "bursts": bursts, "run": run, **profile(harness)}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", action="store_true", help="run on cuda (the H200 batch passes this)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", default=None)
    args = parser.parse_args()
    device = "cuda" if args.gpu else (args.device or "cpu")
    tasks = args.tasks or [n for n, t in TASKS.items() if t[device]]
    rows = [row for name in tasks for row in run_task(name, device, args.runs)]
    print(
        f"{'task':<14}{'bursts':>7}{'reward':>7}{'claim us':>10}{'resolved':>9}{'window':>18}{'bursts':>18}{'held':>5}"
    )
    for r in rows:
        window = f"{r['outside_us']}/{r['resolution_us']}" if not r["bursts"] else "-"
        burst = f"{r['burst_outside_us']}/{r['burst_resolution_us']}" if r["burst_outside_us"] is not None else "-"
        print(
            f"{r['task']:<14}{r['bursts']:>7}{str(r['reward']):>7}{str(r['candidate_us']):>10}"
            f"{str(not r['below_resolution']):>9}{window:>18}{burst:>18}{str(r['clamped_blocks']):>5}"
        )
    honest = [r for r in rows if r["bursts"]]
    resolved = all(r["correct"] and not r["below_resolution"] and not r["clamped_blocks"] for r in honest)
    print(f"\nwith bursts: every honest profile resolved and none held: {resolved}")
    sys.exit(0 if resolved else 1)


if __name__ == "__main__":
    main()
