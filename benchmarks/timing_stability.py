"""Timing stability: the same honest kernel profiled again and again, idle and under load.

The demo's kernel (the recorded session of `cuda-agent demo`) is profiled N times on an idle
machine, then N times while a CPU hog keeps every core busy (started and stopped here). Every
profile times eager, torch.compile and the kernel side by side in one window, so a loaded
machine slows all three alike and the ratios stay put. Goal: every speedup against eager within
±25% of the median of all 2N profiles.

    python benchmarks/timing_stability.py --device cpu --runs 5
    python benchmarks/timing_stability.py --gpu --runs 5      # H200; with harness_fidelity.py

Prints one table; exit 1 when the goal is missed or a profile is not correct.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GOAL = 0.25
HOG = "import os\nwhile True:\n    os.getpid()\n"


def cli(*args: str, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-m", "cuda_agent_cli", *args], capture_output=True, text=True, env=env)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit(f"cuda-agent {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")


def demo_workspace(device: str, env: dict[str, str], where: Path) -> Path:
    """Run the recorded demo session once (never applied) and return its session workspace."""
    out = cli("demo", "--device", device, "--dir", str(where / "project"), "--no-apply", "--batch", "--json", env=env)
    session = out.get("session_id") or out.get("session")
    sessions = Path(env["XDG_DATA_HOME"]) / "cuda-agent" / "sessions"
    found = sorted(sessions.glob(f"{session}*/workspace")) if session else sorted(sessions.glob("*/workspace"))
    if not found:
        raise SystemExit(f"no session workspace under {sessions}")
    return found[-1]


def profiles(workspace: Path, device: str, runs: int, env: dict[str, str]) -> list[dict]:
    out = cli("profile", str(workspace), "--device", device, "--repeat", str(runs), "--json", env=env)
    rep = out.get("repeat") or {}
    rows = []
    for i in range(runs):
        rows.append(
            {
                "eager": rep["speedup_vs_eager"]["values"][i],
                "compile": rep["speedup_vs_compile"]["values"][i],
                "kernel_us": rep["candidate_us"]["values"][i],
                "reward": rep["rewards"][i],
            }
        )
    return rows


def start_hog() -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(os.cpu_count() or 1)]


def stop_hog(hog: list[subprocess.Popen]) -> None:
    for p in hog:
        p.kill()
    for p in hog:
        p.wait()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--gpu", action="store_true", help="the CUDA device (an H200 in docs/benchmarks.md)")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    device = "cuda" if a.gpu else a.device
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {
            **os.environ,
            "XDG_DATA_HOME": str(root / "data"),
            "XDG_CACHE_HOME": str(root / "cache"),
            "XDG_CONFIG_HOME": str(root / "config"),
        }
        ws = demo_workspace(device, env, root)
        idle = profiles(ws, device, a.runs, env)
        hog = start_hog()
        try:
            loaded = profiles(ws, device, a.runs, env)
        finally:
            stop_hog(hog)
    every = [r["eager"] for r in idle + loaded]
    mid = statistics.median(every)
    worst = max(abs(v / mid - 1) for v in every)
    print(f"{'':<10}{'vs eager':>22}{'vs torch.compile':>24}{'kernel us':>16}")
    for label, rows in (("idle", idle), ("hog", loaded)):
        e = [r["eager"] for r in rows]
        c = [r["compile"] for r in rows]
        k = [r["kernel_us"] for r in rows]
        print(
            f"{label:<10}{statistics.median(e):>9.2f}x ({min(e):.2f}-{max(e):.2f}){statistics.median(c):>11.2f}x "
            f"({min(c):.2f}-{max(c):.2f}){statistics.median(k):>10.1f} ({min(k):.0f}-{max(k):.0f})"
        )
    print(
        f"all {len(every)} profiles: median {mid:.2f}x vs eager, furthest {worst:.0%} from it "
        f"(goal within {GOAL:.0%}); cores {os.cpu_count()}"
    )
    ok = worst <= GOAL and all(r["reward"] not in (None, -1) for r in idle + loaded)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
