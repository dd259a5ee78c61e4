"""Locked: pinning for the window on the CPU with one thread a side: both sides' processes held
to one and the same core, the harness's own processes (`callers`) kept to the others, and each
thread's affinity put back after.
"""

from __future__ import annotations

import os


class Pinning:
    """Every thread of some processes held to a set of CPUs, and what to put back: each thread's
    own affinity from before, and for threads started meanwhile, their process's."""

    def __init__(self) -> None:
        self.processes: dict[int, set[int]] = {}
        self.threads: dict[int, set[int]] = {}

    def pin(self, pids: list[int], cpus: set[int]) -> bool:
        """True when every thread of every process could be pinned."""
        whole = True
        for pid in pids:
            try:
                self.processes[pid] = os.sched_getaffinity(pid)
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                whole = False
                continue
            for tid in tids:
                try:
                    had = os.sched_getaffinity(tid)
                    os.sched_setaffinity(tid, cpus)
                    self.threads[tid] = had
                except OSError:
                    whole = False
        return whole

    def restore(self) -> None:
        for pid, cpus in self.processes.items():
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
            for tid in tids:
                try:
                    os.sched_setaffinity(tid, self.threads.get(tid, cpus))
                except OSError:
                    continue


def callers() -> list[int]:
    """This process, the zygote that forked it and the zygote's parent (the harness's caller)."""
    from worker_common import parent_of

    found = [os.getpid()]
    zygote = os.getppid()
    caller = parent_of(zygote)
    for pid in (zygote, caller):
        if pid is not None and pid > 1:
            found.append(pid)
    return found
