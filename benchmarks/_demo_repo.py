"""A repository with the CPU demo applied, for the check and build benchmarks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def applied_demo(where: Path) -> Path:
    """Run `cuda-agent demo --device cpu --yes --batch` into `where` (a new folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent_cli",
            "demo",
            "--device",
            "cpu",
            "--dir",
            str(where),
            "--yes",
            "--batch",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0 or not json.loads(proc.stdout or "{}").get("applied"):
        raise SystemExit(f"the demo did not apply: {proc.stderr[-2000:]}")
    return where
