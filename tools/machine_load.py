"""Locked: the load on the machine while an evaluation is timed, from /proc, for the record:
cores kept busy by anything but the evaluation's own processes.
"""

from __future__ import annotations

import os
import time


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def _process_jiffies(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            # utime, stime, and the children's when they were reaped.
            total += int(parts[11]) + int(parts[12]) + int(parts[13]) + int(parts[14])
        except (OSError, IndexError, ValueError):
            pass
    return total


class LoadMeter:
    """Cores kept busy by anything but this evaluation's own processes.

    Only the controller and the executors themselves count as its own: a process one of them
    started and left running is load like any other.
    """

    def __init__(self, pids: list[int]) -> None:
        self.pids = [os.getpid(), *pids]
        self._start: tuple[int, int, int] | None = None

    def _ours(self) -> int:
        return _process_jiffies(self.pids)

    def start(self) -> None:
        busy, total = _cpu_jiffies()
        self._start = (busy, total, self._ours())

    def foreign_cores(self) -> float:
        assert self._start is not None
        busy, total = _cpu_jiffies()
        ours = self._ours()
        b0, t0, o0 = self._start
        cores = os.cpu_count() or 1
        elapsed = (total - t0) / cores
        if elapsed <= 0:
            return 0.0
        return max(0.0, ((busy - b0) - (ours - o0)) / elapsed)


def idle_load(pids: list[int], seconds: float = 0.2) -> float:
    meter = LoadMeter(pids)
    meter.start()
    time.sleep(seconds)
    return meter.foreign_cores()
