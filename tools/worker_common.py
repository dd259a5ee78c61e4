"""Locked helpers shared by the harness jobs that run inside forked worker processes."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from types import ModuleType
from typing import Any

import leaves
import torch
import wire


def apply_precision_flags(mode: str = "dtype") -> dict[str, Any]:
    """The same settings in every process that runs a model: strict float32, or TF32 for
    matmuls and convolutions where the user opted into it (tools/precision.py); returned for
    the record."""
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    import integrity

    return integrity.precision_flags()


def load_module(path: str, name: str) -> ModuleType:
    """Import a Python file under a fixed module name without touching sys.path."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def device_sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def to_device(obj: Any, device: str) -> Any:
    """Every tensor leaf of `obj` (any container: tools/leaves.py) on `device`."""
    return leaves.map_tensors(obj, lambda t: t.to(device))


def fresh_clone(obj: Any) -> Any:
    """A new allocation for every tensor leaf, so no pointer survives from one call to the next."""
    return leaves.map_tensors(obj, lambda t: t.detach().clone())


def to_cpu(obj: Any) -> Any:
    return leaves.map_tensors(obj, lambda t: t.detach().to("cpu"))


def parent_of(pid: int | str) -> int | None:
    """The process's parent, from /proc (None where it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from one scan of /proc (ppid -> pids)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            ppid = parent_of(entry)
            if ppid is not None:
                children.setdefault(ppid, []).append(int(entry))
    return children


def python_threads() -> int:
    return threading.active_count()


def trim_exception(exc: BaseException, limit: int = 1500) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= limit else text[: limit // 2] + "\n…\n" + text[-limit // 2 :]


def run_probe_job(spec: wire.ProbeRequest) -> wire.ProbeResult:
    """What this worker's torch sees: versions, and the GPU when the spec asks about cuda."""
    info: wire.ProbeResult = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": False,
        "gpu": None,
        "capability": None,
        "python": sys.version.split()[0],
        "cpu_threads": 0,  # both read last, below
        "pid": 0,
    }
    if spec.get("device") == "cuda" and torch.cuda.is_available():
        info["cuda_available"] = True
        info["gpu"] = torch.cuda.get_device_name(0)
        info["capability"] = list(torch.cuda.get_device_capability(0))
    info["cpu_threads"] = torch.get_num_threads()
    info["pid"] = os.getpid()
    return info
