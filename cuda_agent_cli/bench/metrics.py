"""The bench's metrics as pure functions of task records (docs/bench.md gives each definition).

A record is one line of results.jsonl; the fields read here are `correct`, `speedup_vs_eager`,
`speedup_vs_compile`, `reward`, `level`, `cost_usd`, `tokens`, `turns`, `wall_s`, `warnings`,
`n_samples` and `n_correct`. Every share is over all tasks of the group: a task that failed, or
whose reference could not run, counts in the denominator.
"""

from __future__ import annotations

import math
import random
import statistics
from math import comb
from typing import Any, Callable, Iterable, Sequence

MARGIN = 0.05  # "faster" means more than 5% faster (the paper's rule)
FAST_P = (0.0, 1.0, 1.5, 2.0)  # KernelBench's fast_p thresholds
BASELINES = ("eager", "compile", "best")
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
PAPER = {"pass_rate": 0.988, "faster_than_compile": 0.968, "geomean_vs_compile": 2.11}


def speedup(record: dict[str, Any], against: str) -> float | None:
    """The task's speedup against eager, torch.compile, or the best baseline timed (None:
    untimed or failed). The best is the record's `speedup_vs_best` (every baseline the harness
    timed: max-autotune and CUDA graphs too); a record without it takes the faster of eager and
    torch.compile."""
    if not record.get("correct"):
        return None
    se, sc = record.get("speedup_vs_eager"), record.get("speedup_vs_compile")
    if against == "eager":
        value = se
    elif against == "compile":
        value = sc
    elif against == "best":
        value = record.get("speedup_vs_best")
        if value is None:
            value = min(se, sc) if se is not None and sc is not None else None
    else:
        raise ValueError(f"unknown baseline {against!r}")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def share(records: Sequence[dict[str, Any]], keep: Callable[[dict[str, Any]], bool]) -> float | None:
    return sum(1 for r in records if keep(r)) / len(records) if records else None


def pass_rate(records: Sequence[dict[str, Any]]) -> float | None:
    return share(records, lambda r: bool(r.get("correct")))


def faster_than(records: Sequence[dict[str, Any]], against: str, margin: float = MARGIN) -> float | None:
    """Share of tasks that are correct and more than `margin` faster than the baseline."""
    return share(records, lambda r: (speedup(r, against) or 0.0) > 1.0 + margin)


def fast_p(records: Sequence[dict[str, Any]], p: float, against: str = "eager") -> float | None:
    """KernelBench's fast_p: share of tasks that are correct and have speedup > p (fast_0 = pass rate)."""
    return share(
        records,
        lambda r: bool(r.get("correct")) and (speedup(r, against) or 0.0) > p if p > 0 else bool(r.get("correct")),
    )


def geomean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def speedup_values(records: Sequence[dict[str, Any]], against: str, failures_as_one: bool) -> list[float]:
    """Correct tasks' speedups; with `failures_as_one`, every other task adds a 1.0."""
    out: list[float] = []
    for r in records:
        s = speedup(r, against)
        if s is not None:
            out.append(s)
        elif failures_as_one:
            out.append(1.0)
    return out


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[Sequence[float]], float | None] = geomean,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap over tasks: `resamples` draws of len(values) with replacement from a
    generator seeded with `seed`; the interval is the sorted statistics at positions
    floor(a*B) and ceil((1-a)*B)-1 with a = (1-level)/2. Same values, same interval."""
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    drawn = [stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)]
    stats = sorted(s for s in drawn if s is not None)
    if len(stats) < len(drawn):  # a statistic that is undefined on some draw has no interval
        return None
    a = (1.0 - level) / 2.0
    lo, hi = math.floor(a * resamples), math.ceil((1.0 - a) * resamples) - 1
    return float(stats[lo]), float(stats[hi])


def geomean_block(records: Sequence[dict[str, Any]], against: str, failures_as_one: bool) -> dict[str, Any]:
    values = speedup_values(records, against, failures_as_one)
    ci = bootstrap_ci(values)
    return {"value": geomean(values), "ci95": list(ci) if ci else None, "n": len(values)}


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of n samples with c correct: 1 - C(n-c, k) / C(n, k)."""
    if n <= 0 or k <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def spread(values: Iterable[float | int | None]) -> dict[str, float] | None:
    """Total, mean, median and max of the values that are present."""
    present = [float(v) for v in values if isinstance(v, (int, float))]
    if not present:
        return None
    return {
        "total": sum(present),
        "mean": statistics.fmean(present),
        "median": float(statistics.median(present)),
        "max": max(present),
    }


def reward_distribution(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many tasks got each reward (-1, 1, 2, 3); an untimed correct task counts under "none"."""
    out = {"-1": 0, "1": 0, "2": 0, "3": 0, "none": 0}
    for r in records:
        reward = r.get("reward")
        out[str(reward) if reward in (-1, 1, 2, 3) else ("-1" if not r.get("correct") else "none")] += 1
    return out


def samples_of(record: dict[str, Any]) -> tuple[int, int]:
    """(samples, correct samples); a record without counts is one sample, correct or not."""
    if record.get("n_samples"):
        return int(record["n_samples"]), int(record.get("n_correct") or 0)
    return 1, 1 if record.get("correct") else 0


def group_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every metric over one group of tasks (a level, or all of them)."""
    ks = sorted({int(r.get("n_samples") or 1) for r in records}) or [1]
    return {
        "tasks": len(records),
        "correct": sum(1 for r in records if r.get("correct")),
        "errors": sum(1 for r in records if r.get("status") == "error"),
        "not_measured": sum(1 for r in records if r.get("status") == "not_measured"),
        "pass_rate": pass_rate(records),
        "faster_than_eager": faster_than(records, "eager"),
        "faster_than_compile": faster_than(records, "compile"),
        "faster_than_best": faster_than(records, "best"),
        "fraction_of_peak": spread(r.get("fraction_of_peak") for r in records if r.get("correct")),
        "fast_p": {b: {f"{p:g}": fast_p(records, p, b) for p in FAST_P} for b in ("eager", "compile")},
        "geomean": {
            b: {"correct_only": geomean_block(records, b, False), "failures_as_one": geomean_block(records, b, True)}
            for b in BASELINES
        },
        "rewards": reward_distribution(records),
        "pass_at_k": {
            str(k): statistics.fmean(pass_at_k(*samples_of(r), k) for r in records) if records else None
            for k in sorted({1, max(ks)})
        },
        "cost_usd": spread(r.get("cost_usd") for r in records),
        "tokens": spread(r.get("tokens") for r in records),
        "turns": spread(r.get("turns") for r in records),
        "wall_s": spread(r.get("wall_s") for r in records),
    }


def baselines_timed(records: Sequence[dict[str, Any]]) -> list[str]:
    """Every baseline some task of the run was timed against, in the harness's order."""
    order = ("eager", "compile", "autotune", "graphs")
    seen = {name for r in records for name in (r.get("baselines") or {})}
    return [name for name in order if name in seen] + sorted(seen - set(order))


def level_of(record: dict[str, Any]) -> str:
    level = record.get("level")
    return f"level{level}" if level is not None else "all"


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Metrics per level and overall, the warnings to review, and the paper's numbers beside them."""
    by_level: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_level.setdefault(level_of(r), []).append(r)
    warnings = [{"task": r.get("task"), "warning": w} for r in records for w in (r.get("warnings") or [])]
    return {
        "overall": group_metrics(records),
        "levels": {k: group_metrics(v) for k, v in sorted(by_level.items())},
        "warnings": warnings,
        "failed": [
            {"task": r.get("task"), "status": r.get("status"), "error": r.get("error")}
            for r in records
            if not r.get("correct")
        ],
        "paper": dict(PAPER),
    }
