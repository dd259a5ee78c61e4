"""Locked: a process's CPU-time clock, read from outside (the controller's bound on the CPU with
one thread a side: harness/clock_stats.py).
"""

from __future__ import annotations

import time


def process_cpu_clock(pid: int) -> int | None:
    """The kernel's CPU-time clock of process `pid` (all its threads, those that ended too), or
    None where it cannot be read. What it counts is work the process did, whoever ran beside
    it: another program taking the core from it moves this process's wall time, not this."""
    import ctypes

    try:
        clock = ctypes.c_int()
        if ctypes.CDLL(None, use_errno=True).clock_getcpuclockid(int(pid), ctypes.byref(clock)) != 0:
            return None
        time.clock_gettime_ns(clock.value)
        return int(clock.value)
    except (OSError, AttributeError, ValueError):
        return None


def cpu_us(clock: int | None) -> float | None:
    if clock is None:
        return None
    try:
        return time.clock_gettime_ns(clock) / 1000.0
    except OSError:
        return None
