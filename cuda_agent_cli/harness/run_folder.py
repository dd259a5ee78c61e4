"""The private folder of one evaluation: spec files, tensors and logs, gone when it ends."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def new() -> Path:
    """A folder private to this user. Input and output tensors of five seeds can reach
    gigabytes, so they go to memory when there is room."""
    shm = Path("/dev/shm")
    base = None
    try:
        if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 8 * 2**30:
            base = str(shm)
    except OSError:
        base = None
    return Path(tempfile.mkdtemp(prefix="cuda-agent-run-", dir=base))


@contextmanager
def evaluation() -> Iterator[Path]:
    """A new folder for one evaluation, removed afterwards (kept with CUDA_AGENT_KEEP_RUNS). The
    controller keeps this process off the timing core while a window is timed and puts it back
    after; it is put back here too, should the controller have ended mid-window."""
    folder = new()
    affinity = _thread_affinities()
    try:
        yield folder
    finally:
        _restore_affinities(affinity)
        if not os.environ.get("CUDA_AGENT_KEEP_RUNS"):
            shutil.rmtree(folder, ignore_errors=True)


def _thread_affinities() -> dict[int, set[int]]:
    """The CPUs each thread of this process may run on (empty where the system cannot say)."""
    found: dict[int, set[int]] = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            found[int(tid)] = os.sched_getaffinity(int(tid))
    except (OSError, ValueError, AttributeError):
        return {}
    return found


def _restore_affinities(before: dict[int, set[int]]) -> None:
    for tid, cpus in before.items():
        try:
            if os.sched_getaffinity(tid) != cpus:
                os.sched_setaffinity(tid, cpus)
        except OSError:
            continue
