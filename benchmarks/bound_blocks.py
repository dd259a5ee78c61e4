"""Where the harness's clock overrules an honest kernel: each timed block of a few profiles.

The demo's recorded kernel is profiled N times, each by a new Harness (as a new session's first
round meets it). For every candidate block the script prints what the kernel's process claimed
(the median call), what the harness's clock saw per call from outside, and the bound that clock
sets on the claims; beside them the null blocks' overhead per call (the candidate's process and
the baselines'). A block whose bound is above its claim is "held": its time is the bound, not the
claim. An honest kernel should be held in no block, or in few enough that the interval and the
reward do not move.

    python benchmarks/bound_blocks.py --gpu --runs 3
    python benchmarks/bound_blocks.py --device cpu --runs 3

Writes every profile's blocks as JSON with --json PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing_stability import demo_workspace  # noqa: E402


def per_call(b: dict[str, Any], key: str = "block_us") -> float:
    return float(b[key]) / max(1, int(b["n"]))


def block_rows(blocks: dict[str, list[dict[str, Any]]], detail: dict[str, Any]) -> list[dict[str, Any]]:
    """Each candidate block's claim, its time per call from outside (the CPU-time clock where
    the harness bounded by it) and the bound the harness applied to it."""
    from cuda_agent_cli.harness import clock_stats

    gap = float(detail.get("idle_gap_us") or 0.0)
    key = "cpu_us" if "cpu_overhead_us" in detail else "block_us"
    held = set(detail.get("held_blocks") or [])
    return [
        {
            "block": i,
            "claim_us": round(statistics.median(clock_stats.call_times(b, gap)), 2),
            "outside_per_call_us": round(per_call(b, key), 1),
            "bound_us": bound,
            "held": i in held,
        }
        for i, (b, bound) in enumerate(zip(blocks["candidate"], detail.get("block_bounds_us") or []))
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    device = "cuda" if args.gpu else args.device

    from cuda_agent_cli.harness import clock_stats, driver

    seen: list[dict[str, Any]] = []
    real = clock_stats.side_by_side

    def recording(blocks: dict[str, list[dict[str, Any]]], seed: int = 0) -> clock_stats.SideBySide:
        stats = real(blocks, seed)
        seen.append({"blocks": blocks, "detail": stats.detail})
        return stats

    clock_stats.side_by_side = recording  # the benchmark's own instrument, never the product's path
    report = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_DATA_HOME": str(Path(tmp) / "data"), "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        os.environ.update(XDG_DATA_HOME=env["XDG_DATA_HOME"], XDG_CACHE_HOME=env["XDG_CACHE_HOME"])
        ws = demo_workspace(device, env, Path(tmp))
        for run in range(args.runs):
            result = driver.profile_path(ws, device=device)
            t = result.timings
            rows = block_rows(seen[-1]["blocks"], seen[-1]["detail"]) if seen else []
            d = seen[-1]["detail"] if seen else {}
            null = d.get("null") or {}
            base = d.get("base_null") or {}
            print(
                f"profile {run + 1}: reward {result.reward}, kernel {t.candidate_us if t else None} us, "
                f"vs eager {t.speedup_vs_eager if t else None} {t.speedup_vs_eager_interval if t else None}; "
                f"overhead {d.get('overhead_us')} us, wander {d.get('wander_us')} us, null block/call "
                f"{null.get('block_per_call_us')} us, baselines' null {base.get('block_per_call_us')} us"
            )
            for r in rows:
                print(
                    f"   block {r['block']:2d}: claim {r['claim_us']:9.2f}  outside {r['outside_per_call_us']:9.1f}"
                    f"  bound {r['bound_us']:9.1f}{'  HELD' if r['held'] else ''}"
                )
            nulls = [round(per_call(b), 1) for b in seen[-1]["blocks"].get("null") or []] if seen else []
            print(f"   null blocks per call: {nulls}")
            report.append(
                {
                    "reward": result.reward,
                    "rows": rows,
                    "detail": d,
                    "null_per_call": nulls,
                    "timings": result.to_json().get("timings"),
                }
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
