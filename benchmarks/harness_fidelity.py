"""Timing fidelity: does the harness's candidate time agree with an independent measurement?

For each task: three profiles of the same candidate (their spread must stay under 3%), then an
independent timing of the very same built kernel in this process: triton.testing.do_bench
(L2 flush, median) on cuda, torch.utils.benchmark's blocked_autorange median on cpu. For kernels
over 20 us the harness median must agree within 5%.

    python benchmarks/harness_fidelity.py --gpu          # H200
    python benchmarks/harness_fidelity.py --device cpu   # CPU device (axpby only)

Exit 1 when a goal is missed or a profile is not correct.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness_tasks import TASKS, make_task_workspace  # noqa: E402

SPREAD_GOAL = 0.03
AGREEMENT_GOAL = 0.05
MIN_US = 20.0


def independent_call(name: str, device: str, module_dir: str):
    """A zero-argument callable running the task's kernel on fresh random inputs."""
    import importlib.util

    import torch

    # Each task builds its own cuda_extension: load this task's file, not the one imported first.
    so_file = next(Path(module_dir).glob("cuda_extension*.so"))
    spec = importlib.util.spec_from_file_location("cuda_extension", so_file)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    torch.manual_seed(0)
    if name == "axpby":
        n = 1 << 24 if device == "cuda" else 1 << 20
        x, y = torch.randn(n, device=device), torch.randn(n, device=device)
        return lambda: ext.axpby(x, y, 1.5, -0.75)
    m, k, n = 1024, 4096, 4096
    x = torch.randn(m, k, device=device)
    w = torch.randn(n, k, device=device) / k**0.5
    b = torch.randn(n, device=device)
    return lambda: ext.gemm_bias_relu_scale(x, w, b, 0.5)


def independent_us(fn, device: str) -> tuple[float, str]:
    if device == "cuda":
        import torch
        from triton.testing import do_bench

        torch.backends.cuda.matmul.allow_tf32 = False
        return float(do_bench(fn, warmup=25, rep=200, return_mode="median")) * 1000.0, "triton do_bench median"
    from torch.utils.benchmark import Timer

    m = Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=1.0)
    return float(m.median) * 1e6, "torch.utils.benchmark median"


def independent_in_subprocess(name: str, device: str, module_dir: str) -> tuple[float, str]:
    """The independent timing in a fresh interpreter: two builds of `cuda_extension` cannot share
    one process (the binding registry is a process-wide symbol, so the second module would be
    filled from the first's registrations)."""
    import json
    import subprocess

    out = subprocess.run(
        [sys.executable, __file__, "--independent", name, device, module_dir],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    us, method = json.loads(out.strip().splitlines()[-1])
    return float(us), str(method)


def main() -> int:
    if sys.argv[1:2] == ["--independent"]:
        import json

        name, device, module_dir = sys.argv[2:5]
        print(json.dumps(independent_us(independent_call(name, device, module_dir), device)))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None)
    p.add_argument("--tasks", default=None)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    device = "cuda" if a.gpu else (a.device or "cpu")
    names = a.tasks.split(",") if a.tasks else [n for n, t in TASKS.items() if t[device] is not None]

    from cuda_agent_cli.harness import Harness

    rows = []
    problems: list[str] = []
    env = {}
    with tempfile.TemporaryDirectory(prefix="harness-fidelity-") as tmp:
        os.environ.setdefault("XDG_CACHE_HOME", str(Path(tmp) / "cache"))
        for name in names:
            ws = make_task_workspace(name, Path(tmp) / name, device)
            harness = Harness(ws, device=device)
            times, method = [], ""
            for _ in range(a.repeats):
                result = harness.profile()
                if not result.correct or result.timings is None:
                    problems.append(f"{name}: profile not correct:\n{result.summary()}")
                    break
                times.append(result.timings.candidate_us)
                d = result.timing_detail
                print(
                    f"{name} profile {len(times)}: {result.timings.candidate_us:.1f} us; per side (events / "
                    f"device idle / block per call): "
                    + "; ".join(
                        f"{side} {d[side]['events_us']} / {d[side]['device_idle_us']} / {d[side]['block_per_call_us']}"
                        for side in ("eager", "compile", "candidate", "null")
                        if side in d
                    )
                    + f"; overhead {d.get('overhead_us')} wander {d.get('wander_us')} clamped "
                    f"{d.get('clamped_blocks')}/{d.get('candidate_blocks')}",
                    flush=True,
                )
                method, env = result.timings.method, result.environment
            if len(times) < a.repeats:
                continue
            spread = (max(times) - min(times)) / statistics.median(times)
            module_dir = str(ws.build_dir / device / "module")
            ref_us, ref_method = independent_in_subprocess(name, device, module_dir)
            harness_us = statistics.median(times)
            diff = (harness_us - ref_us) / ref_us
            rows.append((name, times, spread, ref_us, diff, method, ref_method))
            if spread >= SPREAD_GOAL:
                problems.append(f"{name}: three profiles spread {spread:.1%} (goal < {SPREAD_GOAL:.0%})")
            if ref_us > MIN_US and abs(diff) >= AGREEMENT_GOAL:
                problems.append(
                    f"{name}: harness {harness_us:.1f} us vs {ref_method} {ref_us:.1f} us "
                    f"({diff:+.1%}, goal within {AGREEMENT_GOAL:.0%})"
                )

    print(f"timing fidelity on {env.get('gpu') or 'cpu'} | torch {env.get('torch')} | device {device}")
    if rows:
        print(f"harness method: {rows[0][5]}; independent: {rows[0][6]}")
    print(f"{'task':<14}{'profiles (us)':<30}{'spread':>8}{'independent us':>16}{'harness vs indep.':>19}")
    for name, times, spread, ref_us, diff, _, _ in rows:
        print(f"{name:<14}{' / '.join(f'{t:.1f}' for t in times):<30}{spread:>8.1%}{ref_us:>16.1f}{diff:>+19.1%}")
    for line in problems:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
