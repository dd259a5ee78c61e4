"""The side-by-side window's raw blocks turned into times and speedups with their intervals.

The candidate's own clock is its claim: the harness's clock bounds it from outside, calibrated
by null blocks of the candidate's process and believed no further than the baselines' process
allows (docs/security.md). The reward, review flags and the extension check live beside this
(reward.py, review.py, extension_check.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from cuda_agent_cli.harness import wire

# bootstrap_medians, percentile_interval (check, writeback) and reward_in_words (cli, tui) are
# imported from here elsewhere in the package; they live in bootstrap.py and reward.py.
from cuda_agent_cli.harness.bootstrap import bootstrap_medians as bootstrap_medians
from cuda_agent_cli.harness.bootstrap import paired_ratio
from cuda_agent_cli.harness.bootstrap import percentile_interval as percentile_interval
from cuda_agent_cli.harness.reward import reward_in_words as reward_in_words


@dataclass(frozen=True)
class SideBySide:
    eager_us: float
    compile_us: float
    candidate_us: float
    speedup_vs_eager: float
    speedup_vs_compile: float
    eager_interval: tuple[float, float]
    compile_interval: tuple[float, float]
    trials: int
    clamped_blocks: int
    overhead_us: float
    # Where each side's time per call went, as medians (µs): for the record, not for verdicts.
    detail: dict[str, Any]


BOUND_SLACK = 1.5
# What the harness's clock cannot resolve per call, as a share of the harness's own overhead per
# call: the same process makes its null and its real calls, yet their time around the call
# differs by up to about this much (allocations, the caches, the evidence on written outputs).
BOUND_RESOLUTION = 0.05
# The same for the candidate process's CPU-time clock (the CPU with one thread), whose wander the
# null blocks measure: their median deviation, times three, is the allowance when it is larger.
CPU_BOUND_RESOLUTION = 0.01
# The harness's clock resolves a kernel whose time beyond the harness's own work per call is at
# least this many times what the clock cannot tell apart (the resolution above): below it, the
# bound holds no claim at all (a 4 us relu beside hundreds of us of the harness's work), so the
# result is uncertain and its reward held at 1 (docs/security.md, threat 34). Above it, the
# bound holds a forged claim to (t - resolution) / BOUND_SLACK.
RESOLVED = 1.0
# The null blocks run in the candidate's own process, which can stall on purpose while they run
# (a hook on the request path, a thread it wakes) so that its overhead looks large and the bound
# falls away. What they show is believed up to NULL_TRUST times what the trusted sides'
# processes show around the same calls, plus NULL_TRUST_US: an honest candidate's process does
# a little more per call (the op guard, the evidence), not several times as much: 1.13-1.18
# times on the H200, 0.9 times on the CPU (docs/benchmarks.md). Their wander is believed up to
# twice the trusted sides' own or half the trusted overhead, whichever is more: an honest
# candidate's process on the H200 wandered up to a third of its overhead (712 of 2,176 µs), and
# a tighter cap overruled its noisy blocks enough to move the interval, and with it the reward.
NULL_TRUST, NULL_TRUST_US = 1.5, 50.0
# On the CPU-time bound, against the null blocks of the baselines' process on its own CPU-time
# clock (the same work on the same clock): an honest candidate's process measured 0.92-1.24
# times theirs on the dev CPU (docs/benchmarks.md, "Null blocks on the CPU"). The wall-clock
# bound (CUDA) keeps NULL_TRUST. Against their wall clock, which carries the round trip too,
# NULL_TRUST_WALL.
NULL_TRUST_SAME = 1.2
NULL_TRUST_WALL = 1.05
# No call is believed to take less than this (µs): a claim of 0 would make any ratio infinite.
MIN_CALL_US = 0.1
# Their wander there is believed up to twice that of the baselines' process's, or this share of
# its overhead, whichever is more.
CPU_WANDER_SHARE = 0.2
# The result says the null blocks were overruled only where they showed more than this many
# times what is believed (a process stalling on purpose): below it the cap bounds them quietly,
# since between two processes on a busy 2-core machine their overheads differ by up to a fifth.
NULL_FLAG = 1.5
# Harness work that a call always costs (the fresh copy, the perturbation, the cache sweep, the
# evidence) is done in the candidate's process, where its code could skip part of it: a sweep
# skipped lets its calls start from warm caches. On the CPU-time clock, part of that work was
# not done when the null blocks of the candidate's process show less than SKIPPED_NULL_SHARE of
# what the baselines' process's show, or its timed calls less than SKIPPED_REAL_SHARE of what
# its own null calls show. Honest processes on the dev CPU measured 0.85-1.23 and 0.99-1.57
# (fifteen candidates, docs/benchmarks.md).
SKIPPED_NULL_SHARE = 0.6
SKIPPED_REAL_SHARE = 0.8


def _overhead_and_wander(overheads: Sequence[float]) -> tuple[float, float]:
    """The typical overhead per call of some null blocks (their median, not below 0) and how
    much it wanders (three times their median deviation; 0 for a single block)."""
    overhead = max(0.0, statistics.median(overheads))
    wander = 3.0 * statistics.median([abs(x - overhead) for x in overheads]) if len(overheads) > 1 else 0.0
    return overhead, wander


def _idle_gap(side: Sequence[wire.Block]) -> float | None:
    """The median over a side's calls of how long the device stayed busy past their events
    (None without calls)."""
    gaps = [w - e for b in side for e, w in zip(b["events_us"], b.get("walls_us") or b["events_us"])]
    return statistics.median(gaps) if gaps else None


def _per_call_block(b: wire.Block) -> float:
    """A block's time from the harness's clock, per call (µs)."""
    n = max(1, int(b.get("n") or len(b["events_us"])))
    return float(b.get("block_us", sum(b["events_us"]))) / n


def _per_call_cpu(b: wire.Block) -> float:
    """A block's time on the candidate process's CPU-time clock, per call (µs)."""
    return float(b["cpu_us"]) / max(1, int(b.get("n") or len(b["events_us"])))


def side_by_side(blocks: wire.SideBlocks, seed: int = 0) -> SideBySide:
    """Times and ratios from one window of interleaved blocks (tools/controller.py).

    Baseline blocks are trusted: their time is the median of their own events. The candidate's
    events are its process's claim; the harness's clock timed each block from outside, and
    `(block / calls - overhead - max(wander, BOUND_RESOLUTION * overhead)) / BOUND_SLACK` bounds
    the candidate's mean call time from below, where the overhead (fresh inputs, the flush, the op guard, the
    synchronizes, the evidence, the round trip) is the median per call that the null blocks of
    the candidate's own process showed beyond their events (the baseline blocks' when there are
    none), and the wander three times its median deviation. A call's claim is its
    events, or the time until the device was idle when work escaped them; a block's time is
    the median of its claims, unless the mean claim is below the bound: then the bound. Where
    every block carries the candidate process's CPU time (`cpu_us`: the CPU with one thread),
    the bound is drawn from that clock instead, with CPU_BOUND_RESOLUTION. Each
    ratio is the median over the rounds of the round's baseline block time over its candidate
    block time, with a bootstrap 95% interval over the rounds.
    """
    cand = blocks["candidate"]
    eager = blocks["eager"]
    comp = blocks.get("compile") or eager
    trusted = [b for side in ("eager", "compile") for b in blocks.get(side) or []]
    # What the harness's clock adds per call around the candidate's calls, typically and how
    # much it wanders: from the null blocks of the candidate's own process (the same calls around
    # a stand-in), else from the trusted sides.
    calibration = [b for b in blocks.get("null") or [] if b["events_us"]] or [b for b in trusted if b["events_us"]]
    overheads = [_per_call_block(b) - statistics.fmean(b["events_us"]) for b in calibration]
    overhead, wander = _overhead_and_wander(overheads) if overheads else (0.0, 0.0)
    # The trusted measure of that overhead: the same null blocks made in the baselines' process,
    # where no candidate code ever ran, else the baselines' own calls.
    trusted_timed = [b for b in blocks.get("base_null") or [] if b["events_us"] and "block_us" in b] or [
        b for b in trusted if b["events_us"] and "block_us" in b
    ]
    trusted_overheads = [_per_call_block(b) - statistics.fmean(b["events_us"]) for b in trusted_timed]
    most_overhead = most_wander = most_cpu_overhead = float("inf")
    base = 0.0
    if trusted_overheads:
        base, base_wander = _overhead_and_wander(trusted_overheads)
        most_overhead = NULL_TRUST * base + NULL_TRUST_US
        # The CPU-time bound against the wall-clock overhead of the baselines' own null blocks,
        # where their CPU-time clock could not be read (replaced below where it could): an honest
        # candidate's CPU time measured 0.97-1.02 times that.
        most_cpu_overhead = (NULL_TRUST_WALL if blocks.get("base_null") else NULL_TRUST) * base + NULL_TRUST_US
        most_wander = max(2.0 * base_wander, 0.5 * base) + NULL_TRUST_US
    null_capped = overhead > most_overhead or wander > most_wander
    null_stalled = overhead > NULL_FLAG * most_overhead or wander > NULL_FLAG * most_wander
    overhead, wander = min(overhead, most_overhead), min(wander, most_wander)
    # How long the device stays busy past a call's events (the lead-in and the flush before it,
    # still running when the call's clock starts): a trusted call's, or less where the null
    # blocks of the candidate's process show less. That process does more on the host before
    # each call's clock starts (the op guard, the evidence), so less of what runs ahead is left
    # by then; taking the trusted gap there subtracted 80 us of an unjoined stream's hidden
    # 291 us on the H200. A process that makes its null calls look slower only gets the trusted
    # gap.
    idle_gap = _idle_gap(trusted)
    null_gap = _idle_gap([b for b in blocks.get("null") or [] if b["events_us"]])
    if trusted and null_gap is not None:
        idle_gap = min(idle_gap or 0.0, max(0.0, null_gap))
    idle_gap = idle_gap or 0.0
    # On the CPU with one thread the candidate's process is timed by its CPU-time clock instead
    # (tools/controller.py): it bounds a call's time from below just as the wall clock does,
    # since all of a call's work is this process's, but other programs taking the core do not
    # inflate it, and it wanders little enough that the allowance for what the wall clock
    # cannot resolve is not needed: a loaded machine no longer overrules an honest claim, and a
    # lying one is held closer to its work.
    cpu_null = [b for b in blocks.get("null") or [] if b["events_us"] and "cpu_us" in b]
    cpu_bounds = bool(cpu_null) and all("cpu_us" in b for b in cand)
    cpu_overhead = cpu_wander = 0.0
    trusted_cpu: float | None = None
    trusted_cpu_wander = 0.0
    skipped: list[str] = []
    if cpu_bounds:
        cpu_overhead, cpu_wander = _overhead_and_wander(
            [_per_call_cpu(b) - statistics.fmean(b["events_us"]) for b in cpu_null]
        )
        # Against the baselines' process's null blocks on its own CPU-time clock, the same work
        # on the same clock; else against the trusted sides' wall-clock overhead, which is at
        # least their CPU time's.
        base_cpu = [
            _per_call_cpu(b) - statistics.fmean(b["events_us"])
            for b in blocks.get("base_null") or []
            if b["events_us"] and "cpu_us" in b
        ]
        most_cpu_wander = most_wander
        if base_cpu:
            trusted_cpu, trusted_cpu_wander = _overhead_and_wander(base_cpu)
            most_cpu_overhead = NULL_TRUST_SAME * trusted_cpu + NULL_TRUST_US
            most_cpu_wander = max(2.0 * trusted_cpu_wander, CPU_WANDER_SHARE * trusted_cpu) + NULL_TRUST_US
        null_capped = cpu_overhead > most_cpu_overhead or cpu_wander > most_cpu_wander
        null_stalled = cpu_overhead > NULL_FLAG * most_cpu_overhead or cpu_wander > NULL_FLAG * most_cpu_wander
        around_null = cpu_overhead
        if trusted_cpu is not None and cpu_overhead < SKIPPED_NULL_SHARE * trusted_cpu - NULL_TRUST_US:
            skipped.append(
                f"its process spent {cpu_overhead:.0f} us of harness work around each call that ran none "
                f"of its code, where the baselines' process spent {trusted_cpu:.0f} us"
            )
        cpu_overhead, cpu_wander = min(cpu_overhead, most_cpu_overhead), min(cpu_wander, most_cpu_wander)
        around = statistics.median([_per_call_cpu(b) - statistics.fmean(b["events_us"]) for b in cand])
        if around < SKIPPED_REAL_SHARE * cpu_overhead - NULL_TRUST_US:
            skipped.append(
                f"its process spent {around:.0f} us of harness work around each timed call, where it "
                f"spent {cpu_overhead:.0f} us around each call that ran none of its code"
            )
    # Discounted by BOUND_SLACK, so noise never overrules an honest claim, while a claim
    # several times too small always is.
    bounds = []
    for b in cand:
        bound = (
            (_per_call_block(b) - overhead - max(wander, BOUND_RESOLUTION * overhead)) / BOUND_SLACK
            if "block_us" in b
            else 0.0
        )
        if cpu_bounds:
            bound = (
                _per_call_cpu(b) - cpu_overhead - max(cpu_wander, CPU_BOUND_RESOLUTION * cpu_overhead)
            ) / BOUND_SLACK
        bounds.append(bound)
    # A block is held to no more than the median block's bound: the host stalls now and then
    # for a few hundred µs (a collection, an interrupt), in real and null blocks alike, and a
    # stall in a real block is not the kernel's work. Work a kernel hides from its claims is in
    # every block, so the median bound still holds a forged claim to it.
    typical = statistics.median(bounds) if bounds else 0.0
    bounds = [min(bound, typical) for bound in bounds]
    # What the harness's clock says a call took beyond its own work, and what it cannot tell
    # apart. Below RESOLVED times that, the bound cannot hold a forged claim at all: the clock
    # does not resolve the kernel, and its claims cannot be checked.
    if cpu_bounds:
        outside = statistics.median([_per_call_cpu(b) for b in cand]) - cpu_overhead
        resolution = max(cpu_wander, CPU_BOUND_RESOLUTION * cpu_overhead)
    else:
        outside = (
            statistics.median([_per_call_block(b) for b in cand if "block_us" in b]) - overhead
            if any("block_us" in b for b in cand)
            else float("inf")
        )
        resolution = max(wander, BOUND_RESOLUTION * overhead)
    below_resolution = outside < RESOLVED * resolution
    held: list[int] = []
    cand_times: list[float] = []
    for i, (b, bound) in enumerate(zip(cand, bounds)):
        claims = call_times(b, idle_gap)
        claimed = statistics.median(claims)
        if bound > statistics.fmean(claims) * 1.02 + 0.5:
            held.append(i)
            claimed = max(claimed, bound)
        cand_times.append(max(claimed, MIN_CALL_US))
    clamped = len(held)
    eager_times = [statistics.median(b["events_us"]) for b in eager]
    comp_times = [statistics.median(b["events_us"]) for b in comp]
    rounds = min(len(cand_times), len(eager_times), len(comp_times))
    eager_times, comp_times, cand_times = eager_times[:rounds], comp_times[:rounds], cand_times[:rounds]

    # Each round's ratio pairs blocks timed next to each other, so whatever slowed the machine
    # during that round (a neighbour on the host, a burst on the other core) slows both sides
    # of it and cancels; a ratio of medians taken across the window would carry it instead.
    e_rounds = [paired_ratio(e, k) for e, k in zip(eager_times, cand_times)]
    c_rounds = [paired_ratio(c, k) for c, k in zip(comp_times, cand_times)]
    e_samples = bootstrap_medians(e_rounds, seed)
    c_samples = bootstrap_medians(c_rounds, seed)
    cand_us = statistics.median(cand_times)

    def med(side: list[wire.Block], key: Literal["events_us", "walls_us"]) -> float | None:
        values = [v for b in side for v in b.get(key) or []]
        return round(statistics.median(values), 2) if values else None

    def per_call(side: list[wire.Block]) -> dict[str, Any]:
        found = {
            "events_us": med(side, "events_us"),
            "device_idle_us": med(side, "walls_us"),
            "block_per_call_us": round(statistics.median([_per_call_block(b) for b in side]), 2),
        }
        if all("cpu_us" in b for b in side):
            found["cpu_per_call_us"] = round(statistics.median([_per_call_cpu(b) for b in side]), 2)
        return found

    detail: dict[str, Any] = {
        name: per_call(side)
        for name, side in (
            ("eager", eager),
            ("compile", comp),
            ("candidate", cand),
            ("null", blocks.get("null") or []),
            ("base_null", blocks.get("base_null") or []),
        )
        if side
    }
    detail.update(
        overhead_us=round(overhead, 2),
        wander_us=round(wander, 2),
        idle_gap_us=round(idle_gap, 2),
        clamped_blocks=clamped,
        candidate_blocks=len(cand),
        null_capped=null_capped,
        null_stalled=null_stalled,
        block_bounds_us=[round(x, 1) for x in bounds],
        held_blocks=held,
        outside_us=round(outside, 2) if math.isfinite(outside) else None,
        resolution_us=round(resolution, 2),
        below_resolution=below_resolution,
        trusted_overhead_us=round(base, 2),
        skipped_work=skipped,
    )
    if cpu_bounds:
        # Around each call, before any cap: its timed calls, its null calls (what the skipped-work
        # rule compares; benchmarks/harness_work.py).
        detail.update(
            cpu_overhead_us=round(cpu_overhead, 2),
            cpu_wander_us=round(cpu_wander, 2),
            candidate_cpu_per_call_us=round(statistics.median([_per_call_cpu(b) for b in cand]), 2),
            cpu_around_timed_us=round(around, 2),
            cpu_around_null_us=round(around_null, 2),
        )
        if trusted_cpu is not None:
            detail.update(
                trusted_cpu_overhead_us=round(trusted_cpu, 2), trusted_cpu_wander_us=round(trusted_cpu_wander, 2)
            )
    return SideBySide(
        eager_us=statistics.median(eager_times),
        compile_us=statistics.median(comp_times),
        candidate_us=cand_us,
        speedup_vs_eager=statistics.median(e_rounds),
        speedup_vs_compile=statistics.median(c_rounds),
        eager_interval=percentile_interval(e_samples),
        compile_interval=percentile_interval(c_samples),
        trials=sum(b["n"] for b in cand[:rounds]),
        clamped_blocks=clamped,
        overhead_us=overhead,
        detail=detail,
    )


# A call whose device stays busy this much longer than its own stream's events ran work the
# events did not see (another stream): its time is the time until the device was idle.
ESCAPE_RATIO, ESCAPE_SLACK_US = 1.5, 50.0


def call_times(block: wire.Block, idle_gap: float = 0.0) -> list[float]:
    """Each call's time: its events, or the time until the device was idle (less the gap a
    trusted call shows) when work escaped them."""
    walls = block.get("walls_us") or []
    out = []
    for i, event in enumerate(block["events_us"]):
        wall = (walls[i] if i < len(walls) else event) - idle_gap
        out.append(wall if wall > ESCAPE_RATIO * event + ESCAPE_SLACK_US else event)
    return out
