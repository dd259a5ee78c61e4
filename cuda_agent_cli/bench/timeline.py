"""How busy a run kept its devices, from the wall-clock spans the records carry.

Each record has `held` (the span its slot or Ray worker spent on the task) and `device_busy`
(the spans of its scoring rounds, while its device was reserved for it), in epoch seconds.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence


def union_seconds(spans: Iterable[Sequence[float]]) -> float:
    """Seconds covered by at least one of the spans (overlaps counted once)."""
    total, end = 0.0, None
    for a, b in sorted((float(s[0]), float(s[1])) for s in spans if s[1] > s[0]):
        if end is None or a > end:
            total, end = total + b - a, b
        elif b > end:
            total, end = total + b - end, b
    return total


def busy_fraction(
    records: Sequence[dict[str, Any]], start: float | None = None, end: float | None = None
) -> dict[str, Any]:
    """Per device (the record's `gpu`, "cpu" without one), the share of the run's wall time its
    scoring rounds covered, and over all devices together. The run spans [start, end], by
    default from the first task's start to the last one's end."""
    held = [r["held"] for r in records if r.get("held")]
    lo = start if start is not None else min((h[0] for h in held), default=0.0)
    hi = end if end is not None else max((h[1] for h in held), default=0.0)
    wall = max(0.0, hi - lo)
    spans: dict[str, list[Sequence[float]]] = {}
    for r in records:
        device = str(r["gpu"]) if r.get("gpu") not in (None, "") else "cpu"
        spans.setdefault(device, []).extend([max(s[0], lo), min(s[1], hi)] for s in r.get("device_busy") or [])
    busy = {d: union_seconds(s) for d, s in sorted(spans.items())}
    return {
        "wall_s": round(wall, 3),
        "devices": {d: round(b / wall, 4) if wall else 0.0 for d, b in busy.items()},
        "overall": round(sum(busy.values()) / (wall * len(busy)), 4) if wall and busy else 0.0,
    }


def cpu_times(stat: str = "/proc/stat") -> tuple[float, float] | None:
    """(busy, total) jiffies of every core together so far (Linux); None where unreadable."""
    try:
        with open(stat) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [float(v) for v in fields[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0.0)  # idle and iowait
    return sum(values) - idle, sum(values)


def cpu_utilization(before: tuple[float, float] | None, after: tuple[float, float] | None) -> float | None:
    """The share of all cores' time the machine spent busy between two `cpu_times` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 4)
