"""`cuda-agent build`: build every integrated kernel ahead of time into the cache its loader reads.

Each kernel is built by its own loader (the copy next to the module), in a fresh interpreter
started in the repository, so the name, flags and cache folder are exactly those the first call
of the patched module will look for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cuda_agent_cli.errors import EnvironmentMissing

_BUILD = r"""
import json, runpy, sys
ns = runpy.run_path(sys.argv[1])
if "build" in ns:
    result = ns["build"](announce=False)
else:  # a loader written before `build` existed: loading builds and caches it
    ns["_load_new_class"]()
    result = {"built": True, "name": "", "library": ""}
result.pop("module", None)
print("CUDA_AGENT_BUILD " + json.dumps(result))
"""


@dataclass
class BuildResult:
    target: str
    device: str
    ok: bool
    built: bool = False  # False: a built copy was already in the cache
    seconds: float = 0.0
    library: str = ""
    error: str = ""
    environment: bool = False  # the failure is a missing compiler or toolkit (exit 3)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "device": self.device,
            "ok": self.ok,
            "built": self.built,
            "seconds": round(self.seconds, 3),
            "library": self.library,
            "error": self.error or None,
        }


def _arch_list(arch: str | None) -> str | None:
    """ "sm_90" -> "9.0" for TORCH_CUDA_ARCH_LIST."""
    if arch and arch.startswith("sm_") and arch[3:].isdigit() and len(arch) >= 5:
        digits = arch[3:]
        return f"{digits[:-1]}.{digits[-1]}"
    return None


def missing_toolchain(device: str, machine: Any) -> str | None:
    cxx = os.environ.get("CXX") or "c++"
    if shutil.which(cxx) is None:
        return f"no C++ compiler ({cxx}) was found"
    if device == "cuda":
        from cuda_agent_cli.doctor import find_nvcc

        if machine.torch is not None and machine.cuda is None:
            return f"torch {machine.torch} here has no CUDA support, so CUDA kernels cannot be built with it"
        if find_nvcc() is None:
            return "nvcc (the CUDA compiler) was not found"
    return None


def build_kernel(
    root: Path, entry: dict[str, Any], machine: Any, cache_dir: Path | None = None, timeout: float = 3600.0
) -> BuildResult:
    device = str(entry.get("device") or "cuda")
    target = str(entry["target"])
    missing = missing_toolchain(device, machine)
    if missing:
        return BuildResult(target, device, ok=False, error=missing, environment=True)
    loader = root / str(entry.get("folder") or "") / "loader.py"
    if not entry.get("folder") or not loader.is_file():
        return BuildResult(
            target,
            device,
            ok=False,
            error=f"{loader.relative_to(root) if entry.get('folder') else 'the kernel folder'} is missing",
        )
    env = {k: v for k, v in os.environ.items() if k != "CUDA_AGENT_DISABLE_KERNELS"}
    if cache_dir is not None:
        env["CUDA_AGENT_KERNEL_CACHE"] = str(cache_dir)
    if device == "cuda" and not env.get("TORCH_CUDA_ARCH_LIST") and not machine.gpus and _arch_list(entry.get("arch")):
        # No GPU to ask (a Docker build): build for the architecture the kernel was verified on.
        env["TORCH_CUDA_ARCH_LIST"] = _arch_list(entry.get("arch")) or ""
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-B", "-c", _BUILD, str(loader)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return BuildResult(
            target,
            device,
            ok=False,
            seconds=time.perf_counter() - start,
            error=f"the build took more than {timeout:.0f} s",
        )
    seconds = time.perf_counter() - start
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("CUDA_AGENT_BUILD ")), None)
    if proc.returncode != 0 or line is None:
        errors = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
        detail = next((ln for ln in reversed(errors) if "Error" in ln or "error" in ln), errors[-1] if errors else "")
        return BuildResult(
            target,
            device,
            ok=False,
            seconds=seconds,
            error=f"the build failed: {detail.strip()[:400]}" if detail else "the build failed",
        )
    info = json.loads(line.split(" ", 1)[1])
    return BuildResult(
        target, device, ok=True, built=bool(info.get("built")), seconds=seconds, library=str(info.get("library") or "")
    )


def build_kernels(
    root: Path,
    entries: list[dict[str, Any]],
    machine: Any,
    *,
    cache_dir: Path | None = None,
    on_start: Callable[[dict[str, Any]], None] | None = None,
    on_done: Callable[[BuildResult], None] | None = None,
) -> list[BuildResult]:
    out = []
    for entry in entries:
        if on_start is not None:
            on_start(entry)
        r = build_kernel(root, entry, machine, cache_dir)
        out.append(r)
        if on_done is not None:
            on_done(r)
    return out


def build_exit_code(results: list[BuildResult]) -> int:
    if any(not r.ok and r.environment for r in results):
        return EnvironmentMissing.exit_code
    return 1 if any(not r.ok for r in results) else 0
