"""What this machine offers a kernel, read without importing torch or initializing a GPU.

`check --fast` and the manifest need the torch and CUDA versions and the GPU architecture in a
few milliseconds: torch's version comes from its installed metadata and its `version.py`, the
GPUs from `nvidia-smi` (absent on machines without an NVIDIA driver).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cuda_agent_cli.gpu_nodes import query_smi


@dataclass(frozen=True)
class Gpu:
    name: str
    arch: str  # "sm_90"
    index: int | None = None  # nvidia-smi's index (PCI bus order)


@dataclass(frozen=True)
class Machine:
    torch: str | None  # "2.13.0+cpu"; None without torch
    cuda: str | None  # the CUDA version torch was built with; None for a CPU build
    cpu_arch: str  # "x86_64"
    cpu_name: str
    gpus: tuple[Gpu, ...]
    gpus_known: bool = True  # False: nvidia-smi is absent or failed, so `gpus` says nothing

    def gpu_for(self, name: str | None = None) -> Gpu | None:
        """The GPU named `name` when there is one, else the first visible GPU."""
        if name:
            for g in self.gpus:
                if g.name == name:
                    return g
        return self.gpus[0] if self.gpus else None

    def arch(self, device: str, gpu_name: str | None = None) -> str | None:
        if device == "cpu":
            return self.cpu_arch
        g = self.gpu_for(gpu_name)
        return g.arch if g else None


def torch_release(version: str | None) -> str | None:
    """ "2.13.0+cu128" -> "2.13": the feature release, what a kernel's speed depends on."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def cuda_major(version: str | None) -> str | None:
    m = re.match(r"(\d+)", version or "")
    return m.group(1) if m else None


def _torch_versions() -> tuple[str | None, str | None]:
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None, None
    cuda = None
    try:
        spec = importlib.util.find_spec("torch")
        locations = list(spec.submodule_search_locations or []) if spec else []
        text = (Path(locations[0]) / "version.py").read_text() if locations else ""
        m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        cuda = m.group(1) if m else None
        v = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        version = v.group(1) if v else version
    except (OSError, ValueError):
        pass
    return version, cuda


def _visible(indices: list[int]) -> list[int]:
    """Apply CUDA_VISIBLE_DEVICES (numeric form) to nvidia-smi's indices."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return indices
    picked: list[int] = []
    for part in env.split(","):
        part = part.strip()
        if not part.isdigit():
            return indices if part.startswith(("GPU-", "MIG-")) else picked
        if int(part) in indices:
            picked.append(int(part))
    return picked


@functools.lru_cache(maxsize=1)
def _query_gpus() -> tuple[tuple[Gpu, ...], bool]:
    """Every GPU nvidia-smi lists, by its index, and whether nvidia-smi could be asked at all:
    asked once a process, for every reader of this machine's GPUs and for `pick_device`."""
    try:
        proc = query_smi("index,name,compute_cap", timeout=20)
    except (OSError, subprocess.SubprocessError):
        return (), False
    if proc is None:
        # No driver tools: no NVIDIA GPU, unless a container hides them (then torch knows more).
        return (), not Path("/dev/nvidia0").exists()
    if proc.returncode != 0:
        # "No devices were found" is an answer; a driver mismatch is not.
        return (), "No devices were found" in (proc.stdout + proc.stderr)
    rows: dict[int, Gpu] = {}
    for line in proc.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit() and re.fullmatch(r"\d+\.\d+", parts[2]):
            rows[int(parts[0])] = Gpu(parts[1], "sm_" + parts[2].replace(".", ""), int(parts[0]))
    return tuple(rows[i] for i in sorted(rows)), True


def all_gpus() -> tuple[Gpu, ...]:
    """Every GPU of this machine, in nvidia-smi's index order, whatever CUDA_VISIBLE_DEVICES says
    (what a scheduler hands out one slot at a time)."""
    return _query_gpus()[0]


def _gpus() -> tuple[tuple[Gpu, ...], bool]:
    """The visible GPUs, and whether nvidia-smi could be asked at all."""
    gpus, known = _query_gpus()
    by_index = {g.index: g for g in gpus if g.index is not None}
    return tuple(by_index[i] for i in _visible(sorted(by_index))), known


# A visible GPU this busy (nvidia-smi's utilization.gpu, median of a few readings) with none of
# this session's work on it is in use by another program.
BUSY_UTILIZATION = 20.0


def gpu_busy_elsewhere(readings: int = 5, pause_s: float = 0.1) -> bool | None:
    """Whether a visible GPU is kept busy by something else right now: asked after an evaluation
    has ended, when none of its processes is left, so what the device still does is another
    program's. None where nvidia-smi cannot say."""
    import statistics
    import time

    samples: dict[int, list[float]] = {}
    for i in range(readings):
        try:
            proc = query_smi("index,utilization.gpu", timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        if proc is None or proc.returncode != 0:
            return None
        for line in proc.stdout.splitlines():
            parts = [p.strip().rstrip(" %") for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit():
                try:
                    samples.setdefault(int(parts[0]), []).append(float(parts[1]))
                except ValueError:
                    continue
        if i + 1 < readings:
            time.sleep(pause_s)
    visible = _visible(sorted(samples))
    if not visible:
        return None
    return any(statistics.median(samples[i]) >= BUSY_UTILIZATION for i in visible)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    """Memory available to new processes now (MemAvailable), in GiB; None where /proc does not say."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return None


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_timing_threads(cores: int | None = None) -> int:
    """torch's threads for each side of a CPU comparison: half the cores (`cores`, else this
    process's usable ones). With every core, one other busy program leaves a parallel region's
    threads spinning at its barrier for a thread that has no core: torch.compile's OpenMP code
    took 10 ms instead of 60 µs that way, and the deployment probe's original forward read 64x
    slower beside one spinning process on two cores."""
    return max(1, (cores or usable_cores()) // 2)


def environment_key() -> str:
    """This Python environment (its prefix, interpreter and torch build) as a short digest, for
    builds whose command line holds the environment's include paths."""
    import hashlib
    import sys

    text = "\0".join([sys.prefix, sys.version, _torch_versions()[0] or ""])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def this_machine() -> Machine:
    torch, cuda = _torch_versions()
    gpus, known = _gpus()
    return Machine(
        torch=torch, cuda=cuda, cpu_arch=platform.machine(), cpu_name=_cpu_name(), gpus=gpus, gpus_known=known
    )


DEVICES = ("cuda", "cpu")


def pick_device(requested: str | None) -> str:
    """The device a session or command runs on, decided here for every front door: the one asked
    for, else cuda when nvidia-smi shows a GPU, else cpu. No torch import, so the CLI's own
    process stays light; the harness checks in its worker that torch can use the device."""
    if requested:
        if requested not in DEVICES:
            from cuda_agent_cli.errors import BadInput

            raise BadInput(f"unknown device {requested!r}", "use --device cuda or --device cpu")
        return requested
    return "cuda" if this_machine().gpus else "cpu"
