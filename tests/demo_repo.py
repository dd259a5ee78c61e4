"""A repository with the CPU demo applied, made by the real `cuda-agent demo` command, for the
tests that need an integrated kernel to check or fix."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

# The suite's shared build folders (tests/conftest.py): the commands it runs use them too.
SHARED_BUILDS = (
    "CUDA_AGENT_PCH_DIR",
    "CUDA_AGENT_OBJECTS_DIR",
    "CUDA_AGENT_COMPILE_CACHE",
    "CUDA_AGENT_KERNEL_CACHE",
    "CUDA_AGENT_INLINE_DIR",
)
# What a test about building the loader's extension or a load_inline candidate must not find
# built already.
BUILT_ELSEWHERE = ("CUDA_AGENT_KERNEL_CACHE", "CUDA_AGENT_INLINE_DIR")


def own_builds(env: dict[str, str]) -> dict[str, str]:
    """env without the suite's store of built extensions: what the test builds, it builds."""
    return {k: v for k, v in env.items() if k not in BUILT_ELSEWHERE}


def suite_env(api_keys: bool = True) -> dict[str, str]:
    """This environment without cuda-agent's own settings, the suite's shared build folders kept
    (and without API keys unless api_keys)."""
    return {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("CUDA_AGENT_") or k in SHARED_BUILDS) and (api_keys or not k.endswith("_API_KEY"))
    }


def clean_env(tmp: Path, cache: Path) -> dict[str, str]:
    """This environment without cuda-agent's own settings or API keys, with private XDG folders
    and the shared harness cache."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CUDA_AGENT_", "GITHUB_")) and not k.endswith("_API_KEY")
    }
    # The suite's choice of baselines, its shared precompiled header and object store (tests/conftest.py) hold
    # in the commands it runs too.
    for name in ("CUDA_AGENT_BASELINES", *SHARED_BUILDS):
        if name in os.environ:
            env[name] = os.environ[name]
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


def shared_cpu_demo(cache: Path, dest: Path) -> dict[str, Any]:
    """The CPU demo applied once for the whole test run (every test process shares it, the first
    one makes it while the others wait), copied to `dest`; returns the demo's JSON result. Tests
    that only need an applied repository take a copy instead of running the demo each."""
    shared = cache.parent / "shared-cpu-demo"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = shared / "result.json"
        if not made.is_file():
            proc = apply_cpu_demo(shared, cache)
            if proc.returncode != 0:
                raise AssertionError(f"the CPU demo failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
            made.write_text(proc.stdout)
    shutil.copytree(shared / "demo", dest, symlinks=True)
    return json.loads(made.read_text())
