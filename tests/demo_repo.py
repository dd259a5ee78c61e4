"""A repository with the CPU demo applied, made by the real `cuda-agent demo` command, for the
tests that need an integrated kernel to check or fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def clean_env(tmp: Path, cache: Path) -> dict[str, str]:
    """This environment without cuda-agent's own settings or API keys, with private XDG folders
    and the shared harness cache."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CUDA_AGENT_", "GITHUB_")) and not k.endswith("_API_KEY")
    }
    env.update(XDG_DATA_HOME=str(tmp / "data"), XDG_CONFIG_HOME=str(tmp / "config"), XDG_CACHE_HOME=str(cache))
    return env


def apply_cpu_demo(tmp: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """`cuda-agent demo --device cpu --batch --json --yes` into tmp/demo."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent_cli",
            "demo",
            "--device",
            "cpu",
            "--dir",
            str(tmp / "demo"),
            "--batch",
            "--json",
            "--yes",
        ],
        env=clean_env(tmp, cache),
        capture_output=True,
        text=True,
        timeout=900,
    )
