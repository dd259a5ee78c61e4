"""Speedups from paired rounds: each round's ratio, and a bootstrap interval over the rounds."""

from __future__ import annotations

import random
import statistics
from typing import Sequence

BOOTSTRAP_RESAMPLES = 2000


def paired_ratio(base: float, kernel: float) -> float:
    """One round's speedup: its baseline block's time over its candidate block's."""
    return base / kernel if kernel > 0 else float("inf")


def bootstrap_medians(ratios: Sequence[float], seed: int = 0) -> list[float]:
    """The median of `ratios` resampled with replacement, BOOTSTRAP_RESAMPLES times (the same
    seed draws the same rounds for any list of that length)."""
    rng = random.Random(seed)
    n = len(ratios)
    out = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        pick = [rng.randrange(n) for _ in range(n)]
        out.append(statistics.median([ratios[i] for i in pick]))
    return out


def percentile_interval(samples: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    ordered = sorted(samples)
    if not ordered:
        return (float("nan"), float("nan"))
    lo = ordered[int((1 - level) / 2 * (len(ordered) - 1))]
    hi = ordered[int((1 + level) / 2 * (len(ordered) - 1))]
    return (float(lo), float(hi))
