"""`cuda-agent check --fast` over a repository with N integrated kernels (copies of the applied CPU
demo in N packages, each with its own manifest entry).

Usage: python benchmarks/check_fast.py [--repo DIR] [--kernels 20] [--runs 5]
Goal (docs/benchmarks.md): under 5 s for 20 kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _demo_repo import applied_demo  # noqa: E402

from cuda_agent_cli.writeback.manifest import MANIFEST_PATH, load_manifest, render_manifest  # noqa: E402


def many_kernels(demo: Path, dest: Path, n: int) -> None:
    entry = load_manifest((demo / MANIFEST_PATH).read_text()).kernels[0]
    entries = []
    for i in range(n):
        pkg = dest / f"pkg{i}"
        pkg.mkdir(parents=True)
        shutil.copyfile(demo / entry["module_file"], pkg / entry["module_file"])
        shutil.copytree(demo / entry["folder"], pkg / entry["folder"])
        entries.append(
            {
                **entry,
                "target": f"pkg{i}/{entry['target']}",
                "module": f"pkg{i}.{entry['module']}",
                "module_file": f"pkg{i}/{entry['module_file']}",
                "folder": f"pkg{i}/{entry['folder']}",
            }
        )
    (dest / ".cuda-agent").mkdir()
    (dest / MANIFEST_PATH).write_text(render_manifest(entries))
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, help="a repository with the CPU demo applied (default: apply it now)")
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="check-fast-") as tmp:
        tmp_path = Path(tmp)
        demo = args.repo.resolve() if args.repo else applied_demo(tmp_path / "demo")
        repo = tmp_path / "many"
        many_kernels(demo, repo, args.kernels)
        cmd = [sys.executable, "-m", "cuda_agent_cli", "check", "--fast", "--json"]
        times, out = [], {}
        for _ in range(args.runs):
            start = time.perf_counter()
            proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=600)
            times.append(time.perf_counter() - start)
            out = json.loads(proc.stdout)
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"kernels: {len(out['kernels'])}, statuses: {out['counts']}, exit {out['exit_code']}")
        print(
            f"wall: median {statistics.median(times):.3f} s, min {min(times):.3f}, max {max(times):.3f} "
            f"(checks alone: {out['seconds']:.3f} s)"
        )
        worst = max(times)
        print(f"goal: under 5 s for {args.kernels} kernels: {'met' if worst < 5.0 else 'NOT met'}")
        return 0 if worst < 5.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
