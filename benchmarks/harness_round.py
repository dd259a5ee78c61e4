"""Harness round times: cold (nothing cached, baselines included) and warm (one kernel edited).

A round is what the agent pays per attempt: compile + verify + profile of the current candidate.
Cold: a new cache dir and a new worker (torch import, first CUDA init, full build, eager and
torch.compile baselines); torch's files are read once beforehand so the OS page cache is warm
(--cold-disk skips that). Warm: the same Harness after editing one kernel file, so one object
rebuilds; eager and torch.compile are timed again beside the kernel, as in every round. Again:
a new session (new workspace, new worker) on the same machine afterwards, with the user's
caches (stored objects, torch.compile's artifacts) as the first session left them. Ahead: the
same, but the session started its worker and its baselines' warm-up when it opened (what
optimize and chat do while the model writes its first kernel), and the round begins 10 s later.

    python benchmarks/harness_round.py --gpu          # H200: axpby and gemm_epilogue on cuda
    python benchmarks/harness_round.py --device cpu   # CPU device: axpby as a C++ kernel

Goals (cuda): warm round under 6 s, cold round under 35 s, new session's first round under 15 s. Exit 1 when a round is not correct.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness_tasks import TASKS, make_task_workspace, touch_kernel  # noqa: E402

GOALS = {"warm": 6.0, "cold": 35.0, "again": 15.0}
AHEAD_S = 10.0


def one_round(harness, label: str) -> dict:
    start = time.perf_counter()
    result = harness.profile()
    total = time.perf_counter() - start
    t = result.timings
    rebuilt = [r for r in (harness.last_compile or {}).get("rebuilt", []) if not r.endswith(".so")]
    # One line as each round ends, so a run cut short by its caller still says what it measured.
    print(
        f"  {label}: {total:.2f} s, reward {result.reward}, stages {dict(result.stage_seconds)}, "
        f"phases {dict(result.phase_seconds)}",
        file=sys.stderr,
        flush=True,
    )
    return {
        "round": label,
        "total_s": total,
        "correct": result.correct,
        "reward": result.reward,
        "stages": {k: round(v, 3) for k, v in result.stage_seconds.items()},
        "phases": {k: round(v, 3) for k, v in result.phase_seconds.items()},
        "rebuilt": rebuilt,
        "candidate_us": t.candidate_us if t else None,
        "eager_us": t.eager_us if t else None,
        "compile_us": t.compile_us if t else None,
        "method": t.method if t else None,
        "trials": t.trials if t else None,
        "environment": result.environment,
        "summary": result.summary(),
        "precision": next((c.detail for c in result.checks if c.name == "precision_flags"), ""),
        "warnings": list(result.warnings),
        "timing_detail": result.timing_detail,
    }


def run_task(name: str, device: str, warm_rounds: int) -> list[dict]:
    from cuda_agent_cli.harness import Harness

    with tempfile.TemporaryDirectory(prefix="harness-round-") as tmp:
        # A private cache makes the first round truly cold: no build, no baselines, new worker.
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        start = time.perf_counter()
        ws = make_task_workspace(name, Path(tmp) / "session", device)
        harness = Harness(ws, device=device)
        setup = time.perf_counter() - start
        rows = [one_round(harness, "cold")]
        rows[0]["total_s"] += setup
        rows[0]["stages"] = {"worker start": round(setup, 3), **rows[0]["stages"]}
        boot = harness.pool.boot
        rows[0]["phases"] = {
            "worker.boot": boot.get("seconds", 0.0),
            "worker.import_torch": boot.get("import_s", 0.0),
            **rows[0]["phases"],
        }
        for i in range(1, warm_rounds + 1):
            touch_kernel(ws, name, device, i)
            rows.append(one_round(harness, f"warm{i}"))
        harness.pool.close()
        # A new session on a machine that has run cuda-agent before: a new workspace and a new
        # worker, with the user's caches (stored objects, torch.compile's artifacts) as they are.
        start = time.perf_counter()
        ws2 = make_task_workspace(name, Path(tmp) / "session2", device)
        again = Harness(ws2, device=device)
        setup = time.perf_counter() - start
        row = one_round(again, "again")
        row["total_s"] += setup
        row["stages"] = {"worker start": round(setup, 3), **row["stages"]}
        # Whether torch's bytecode came from its install or from the harness's cache.
        row["worker"] = dict(again.pool.boot)
        rows.append(row)
        again.pool.close()
        # The same, as a session meets it: the session starts the worker and warms the baselines
        # when it opens (Harness.start_ahead), while the model writes its first kernel.
        start = time.perf_counter()
        ws3 = make_task_workspace(name, Path(tmp) / "session3", device)
        ahead = Harness(ws3, device=device)
        ahead.start_ahead().join()
        ready = time.perf_counter() - start
        # The prewarm goes on in the service after the worker has taken it; the first round
        # starts when a model's first turn would end at the soonest (AHEAD_S after opening).
        time.sleep(max(0.0, AHEAD_S - ready))
        row = one_round(ahead, "ahead")
        row["stages"] = {"started ahead": round(ready, 3), **row["stages"]}
        rows.append(row)
        ahead.pool.close()
        for r in rows:
            r["task"] = name
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpu", action="store_true", help="run on cuda (the H200 batch passes this)")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None)
    p.add_argument("--tasks", default=None, help="comma-separated: axpby,gemm_epilogue")
    p.add_argument("--warm-rounds", type=int, default=3)
    p.add_argument("--json", type=Path, default=None, help="also write all rows here")
    p.add_argument(
        "--cold-disk",
        action="store_true",
        help="skip reading torch's files once beforehand (a machine that never ran torch)",
    )
    a = p.parse_args()
    if not a.cold_disk:
        # The harness's caches start empty either way; this only puts torch's own files in the
        # OS page cache, as on any machine that has imported torch before.
        import subprocess

        subprocess.run([sys.executable, "-c", "import torch, torch._dynamo, torch.utils.cpp_extension"], check=False)
    device = "cuda" if a.gpu else (a.device or "cpu")
    names = a.tasks.split(",") if a.tasks else [n for n, t in TASKS.items() if t[device] is not None]

    rows: list[dict] = []
    for name in names:
        rows.extend(run_task(name, device, a.warm_rounds))

    env = rows[0]["environment"]
    print(
        f"harness rounds on {env.get('gpu') or 'cpu'} | torch {env.get('torch')} | cuda {env.get('cuda')} | "
        f"device {device}"
    )
    print(f"method: {rows[0]['method']}")
    print(f"precision: {rows[0]['precision'][:200]}")
    print()
    print(
        f"{'task':<14}{'round':<7}{'total s':>9}{'compile s':>11}  {'rebuilt':<34}{'reward':>7}"
        f"{'cand us':>11}{'eager us':>11}{'compile us':>12}"
    )
    for r in rows:
        rebuilt = ",".join(Path(x).name for x in r["rebuilt"]) or "-"
        cand = f"{r['candidate_us']:.1f}" if r["candidate_us"] else "-"
        eager = f"{r['eager_us']:.1f}" if r["eager_us"] else "-"
        comp = f"{r['compile_us']:.1f}" if r["compile_us"] else "-"
        print(
            f"{r['task']:<14}{r['round']:<7}{r['total_s']:>9.2f}{r['stages'].get('compile', 0):>11.2f}  "
            f"{rebuilt[:33]:<34}{str(r['reward']):>7}{cand:>11}{eager:>11}{comp:>12}"
        )
    print()
    print("stages per round (s):")
    for r in rows:
        print(f"  {r['task']:<14}{r['round']:<7}" + ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items()))
        print(f"  {'':<21}" + ", ".join(f"{k} {v:.2f}" for k, v in r.get("phases", {}).items()))
        if r.get("worker"):
            print(f"  {'':<21}worker: {json.dumps(r['worker'])}")
        if r.get("timing_detail"):
            print(f"  {'':<21}per call: {json.dumps(r['timing_detail'])}")
        for w in r.get("warnings", []):
            print(f"  {'':<21}warning: {w[:160]}")
    failed = [r for r in rows if not r["correct"]]
    print()
    for name in dict.fromkeys(names):  # a task named twice is run twice: every cold round counts
        cold = [r["total_s"] for r in rows if r["task"] == name and r["round"] == "cold"]
        warm = [r["total_s"] for r in rows if r["task"] == name and r["round"].startswith("warm")]
        again = [r["total_s"] for r in rows if r["task"] == name and r["round"] == "again"]
        ahead = [r["total_s"] for r in rows if r["task"] == name and r["round"] == "ahead"]
        warm_med = statistics.median(warm) if warm else float("nan")
        met = warm_med < GOALS["warm"] and max(cold) < GOALS["cold"] and max(again) < GOALS["again"]
        goal = (
            f"(goals: warm < {GOALS['warm']:.0f} s, cold < {GOALS['cold']:.0f} s, new session < "
            f"{GOALS['again']:.0f} s: {'met' if met else 'NOT met'})"
            if device == "cuda"
            else ""
        )
        print(
            f"{name}: cold {' / '.join(f'{c:.2f}' for c in cold)} s, warm median {warm_med:.2f} s "
            f"over {len(warm)} rounds, first round of a new session {' / '.join(f'{c:.2f}' for c in again)} s "
            f"(started ahead: {' / '.join(f'{c:.2f}' for c in ahead)} s) {goal}"
        )
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2))
    for r in failed:
        print(f"\nFAILED {r['task']} {r['round']}:\n{r['summary']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
