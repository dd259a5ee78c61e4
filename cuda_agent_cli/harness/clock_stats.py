"""The clock statistics of the side-by-side window: its raw blocks turned into times and
speedups with their intervals.

The candidate's own clock is its claim: the harness's clock bounds it from outside, calibrated
by null blocks of the candidate's process and believed no further than the baselines' process
allows (docs/security.md). Bursts bound the kernels too short for the window's calls. The
reward, review flags and the extension check live beside this (reward.py, review.py,
extension_check.py); the paired ratios' bootstrap in bootstrap.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from cuda_agent_cli.harness import wire
from cuda_agent_cli.harness.bootstrap import bootstrap_medians, paired_ratio, percentile_interval

# The trusted sides of a window, in their order: eager, then the compiled baselines
# (tools/baselines.py, COMPILED_SIDES). torch.compile's default mode is the paper's baseline.
BASELINES = ("eager", "compile", "autotune", "graphs")
BASELINE_NAMES = {
    "eager": "eager",
    "compile": "torch.compile",
    "autotune": "torch.compile max-autotune",
    "graphs": "CUDA graphs",
}


@dataclass(frozen=True)
class Versus:
    """One baseline's time (µs, the median over the rounds) and the candidate's speedup against
    it with its 95% interval."""

    us: float
    speedup: float
    interval: tuple[float, float]


@dataclass(frozen=True)
class SideBySide:
    eager_us: float
    compile_us: float
    candidate_us: float
    speedup_vs_eager: float
    speedup_vs_compile: float
    eager_interval: tuple[float, float]
    compile_interval: tuple[float, float]
    # Every baseline timed in the window (eager and compile included), and the fastest of them.
    versus: dict[str, Versus]
    best: str
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
# The window's bound on the CPU's paired clock (Resolution.window_bound) is twice as slack as a
# block's: an honest candidate's process does somewhat more around a real call than around a
# null one (its output's evidence, the caches its kernel leaves), which a block's wide
# resolution absorbed and the window's narrow one does not. It still holds a claim of a third
# of the work or less, the hidden work of a kernel that claims next to nothing.
WINDOW_SLACK = 3.0
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
# The result says the null blocks were overruled only where their typical overhead showed more
# than this many times what is believed (a process stalling on purpose): below it the cap bounds
# them quietly, since between two processes on a busy 2-core machine their overheads differ by up
# to a fifth. Their wander is capped, never flagged: it is three times a median over a handful
# of rounds, and two honest processes' estimates of it read 0.5-3.6 times each other on the dev
# CPU (docs/benchmarks.md, "Null blocks on the CPU"). A stall that moves the typical overhead
# has to be in most rounds; one in fewer shows only as wander, which the cap holds to what the
# baselines' process allows, as it holds an honest process's noise.
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


@dataclass(frozen=True)
class Overhead:
    """What the harness's clock adds per call around some calls (µs): typically and how much it
    wanders."""

    typical: float
    wander: float


def overhead_of(overheads: Sequence[float]) -> Overhead:
    """The typical overhead per call of some null blocks (their median, not below 0) and how
    much it wanders (three times their median deviation; 0 for a single block)."""
    typical = max(0.0, statistics.median(overheads))
    wander = 3.0 * statistics.median([abs(x - typical) for x in overheads]) if len(overheads) > 1 else 0.0
    return Overhead(typical, wander)


@dataclass(frozen=True)
class RoundOverhead(Overhead):
    """An overhead on the CPU-time clock with each round's null block beside it; its wander is how
    much it moves from one round to the next."""

    by_round: dict[int, float]


def paired_overhead_of(blocks: Sequence[wire.Block]) -> RoundOverhead:
    """Null blocks' overhead per call on their process's CPU-time clock, by round, with the
    wander of a block against its neighbour: three times the median of the differences between
    consecutive rounds. The machine's speed drifts over a window (a neighbour's memory traffic
    slows the harness's sweep and copies for seconds at a time, on every side alike): a candidate
    block is held against the null block of its own round, so only what moves between blocks
    close in time is what the clock cannot tell apart, not the drift across the window."""
    by_round = {int(b.get("round", i)): _around_cpu(b) for i, b in enumerate(blocks)}
    values = [by_round[r] for r in sorted(by_round)]
    typical = max(0.0, statistics.median(values))
    steps = [abs(b - a) for a, b in zip(values, values[1:])]
    wander = 3.0 * statistics.median(steps) if steps else 0.0
    return RoundOverhead(typical, wander, by_round)


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


def _trusted(blocks: wire.SideBlocks) -> list[wire.Block]:
    """The baselines' blocks (eager and the compiled ones), made in a process no candidate code
    ran in."""
    return [b for side in BASELINES for b in blocks.get(side) or []]


def _around_block(b: wire.Block) -> float:
    """The harness's clock's time per call beyond a block's own events (µs)."""
    return _per_call_block(b) - statistics.fmean(b["events_us"])


def _around_cpu(b: wire.Block) -> float:
    """The process's CPU time per call beyond a block's own events (µs)."""
    return _per_call_cpu(b) - statistics.fmean(b["events_us"])


# -- 1. calibration: the candidate process's own overhead ------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """What the harness's clock adds per call around the candidate's calls, as the null blocks of
    its own process show it (the same calls around a stand-in), else the trusted sides' blocks;
    nothing caps it yet."""

    wall: Overhead  # on the controller's clock
    # On the candidate process's CPU-time clock, where every candidate block and some null
    # blocks carry it (the CPU with one thread); None elsewhere: the wall clock bounds them.
    cpu: RoundOverhead | None
    # How long the device stays busy past a call's events (the lead-in and the flush before it,
    # still running when the call's clock starts).
    idle_gap: float


def calibrate(blocks: wire.SideBlocks) -> Calibration:
    """The candidate process's overhead per call on each clock, and the device's idle gap."""
    cand = blocks["candidate"]
    trusted = _trusted(blocks)
    null = blocks.get("null") or []
    calibration = [b for b in null if b["events_us"]] or [b for b in trusted if b["events_us"]]
    overheads = [_around_block(b) for b in calibration]
    wall = overhead_of(overheads) if overheads else Overhead(0.0, 0.0)
    # A trusted call's idle gap, or less where the null blocks of the candidate's process show
    # less. That process does more on the host before each call's clock starts (the op guard,
    # the evidence), so less of what runs ahead is left by then; taking the trusted gap there
    # subtracted 80 us of an unjoined stream's hidden 291 us on the H200. A process that makes
    # its null calls look slower only gets the trusted gap.
    idle_gap = _idle_gap(trusted)
    null_gap = _idle_gap([b for b in null if b["events_us"]])
    if trusted and null_gap is not None:
        idle_gap = min(idle_gap or 0.0, max(0.0, null_gap))
    # On the CPU with one thread the candidate's process is timed by its CPU-time clock instead
    # (tools/controller.py): it bounds a call's time from below just as the wall clock does,
    # since all of a call's work is this process's, but other programs taking the core do not
    # inflate it, and it wanders little enough that the allowance for what the wall clock
    # cannot resolve is not needed: a loaded machine no longer overrules an honest claim, and a
    # lying one is held closer to its work.
    cpu_null = [b for b in null if b["events_us"] and "cpu_us" in b]
    cpu = None
    if cpu_null and all("cpu_us" in b for b in cand):
        cpu = paired_overhead_of(cpu_null)
    return Calibration(wall, cpu, idle_gap or 0.0)


# -- 2. the trusted bounds: how much of that overhead is believed ----------------------------------


@dataclass(frozen=True)
class TrustedBounds:
    """The most overhead and wander believed of the candidate's process on each clock, from the
    same work in the baselines' process, where no candidate code ever ran (unbounded without
    trusted blocks)."""

    wall: Overhead | None  # the baselines' process's own, on the controller's clock
    most_overhead: float
    most_wander: float
    # The baselines' null blocks on that process's own CPU-time clock (with the CPU-time bound).
    cpu: RoundOverhead | None
    most_cpu_overhead: float
    most_cpu_wander: float

    def most_cpu_overhead_in(self, round_: int) -> float:
        """The most CPU-time overhead believed in one round: against that round's own null block
        of the baselines' process where there is one (the machine ran at the same speed for
        both), else against their typical one."""
        if self.cpu is not None and round_ in self.cpu.by_round:
            return NULL_TRUST_SAME * max(0.0, self.cpu.by_round[round_]) + NULL_TRUST_US
        return self.most_cpu_overhead


def trusted_bounds(blocks: wire.SideBlocks, cpu_clock: bool) -> TrustedBounds:
    """What the baselines' process shows around the same calls: its null blocks, else its own
    calls; on the CPU-time clock (`cpu_clock`) its null blocks on that clock where it was read."""
    trusted = _trusted(blocks)
    base_null = blocks.get("base_null") or []
    timed = [b for b in base_null if b["events_us"] and "block_us" in b] or [
        b for b in trusted if b["events_us"] and "block_us" in b
    ]
    overheads = [_around_block(b) for b in timed]
    wall: Overhead | None = None
    most_overhead = most_wander = most_cpu_overhead = float("inf")
    if overheads:
        wall = overhead_of(overheads)
        most_overhead = NULL_TRUST * wall.typical + NULL_TRUST_US
        # The CPU-time bound against the wall-clock overhead of the baselines' own null blocks,
        # where their CPU-time clock could not be read (replaced below where it could): an honest
        # candidate's CPU time measured 0.97-1.02 times that.
        most_cpu_overhead = (NULL_TRUST_WALL if base_null else NULL_TRUST) * wall.typical + NULL_TRUST_US
        most_wander = max(2.0 * wall.wander, 0.5 * wall.typical) + NULL_TRUST_US
    # Against the baselines' process's null blocks on its own CPU-time clock, the same work on
    # the same clock; else against the trusted sides' wall-clock overhead, which is at least
    # their CPU time's.
    cpu: RoundOverhead | None = None
    most_cpu_wander = most_wander
    base_cpu = [b for b in base_null if b["events_us"] and "cpu_us" in b] if cpu_clock else []
    if base_cpu:
        cpu = paired_overhead_of(base_cpu)
        most_cpu_overhead = NULL_TRUST_SAME * cpu.typical + NULL_TRUST_US
        most_cpu_wander = max(2.0 * cpu.wander, CPU_WANDER_SHARE * cpu.typical) + NULL_TRUST_US
    return TrustedBounds(wall, most_overhead, most_wander, cpu, most_cpu_overhead, most_cpu_wander)


@dataclass(frozen=True)
class Clock:
    """The clock the candidate's blocks are bounded on, and the overhead per call believed on it."""

    cpu: bool  # the candidate process's CPU-time clock, else the controller's
    overhead: float
    wander: float
    # On the CPU-time clock, the overhead believed in each round (its null block, capped).
    by_round: dict[int, float] | None = None

    def overhead_around(self, b: wire.Block) -> float:
        """The overhead believed around a candidate block: its round's, else the typical one."""
        if self.by_round is not None and "round" in b and int(b["round"]) in self.by_round:
            return self.by_round[int(b["round"])]
        return self.overhead

    @property
    def resolution(self) -> float:
        """What this clock cannot tell apart per call: the wander, or a share of the overhead."""
        return max(self.wander, (CPU_BOUND_RESOLUTION if self.cpu else BOUND_RESOLUTION) * self.overhead)

    def per_call(self, b: wire.Block) -> float | None:
        """A candidate block's time per call on this clock (None: the block was not timed on it)."""
        if self.cpu:
            return _per_call_cpu(b)
        return _per_call_block(b) if "block_us" in b else None


@dataclass(frozen=True)
class Believed:
    """The candidate process's overhead as believed: its own, capped by the trusted bounds."""

    wall: Overhead
    cpu: Overhead | None
    capped: bool  # its null blocks showed more than is believed, on the clock that bounds it
    stalled: bool  # a typical overhead NULL_FLAG times more: a process stalling on purpose
    cpu_by_round: dict[int, float] | None = None  # each round's, capped by that round's trusted bound

    @property
    def clock(self) -> Clock:
        """The clock that bounds the candidate's blocks: its process's CPU time where that was
        calibrated, else the controller's."""
        if self.cpu is not None:
            return Clock(True, self.cpu.typical, self.cpu.wander, self.cpu_by_round)
        return Clock(False, self.wall.typical, self.wall.wander)


def believe(calibration: Calibration, trusted: TrustedBounds) -> Believed:
    """Cap the candidate process's own overhead by what the trusted bounds allow, and say whether
    they had to (on the clock that bounds its blocks)."""
    own, most, most_wander = calibration.wall, trusted.most_overhead, trusted.most_wander
    if calibration.cpu is not None:
        own, most, most_wander = calibration.cpu, trusted.most_cpu_overhead, trusted.most_cpu_wander
    capped = own.typical > most or own.wander > most_wander
    stalled = own.typical > NULL_FLAG * most
    wall = Overhead(
        min(calibration.wall.typical, trusted.most_overhead), min(calibration.wall.wander, trusted.most_wander)
    )
    cpu = None
    by_round = None
    if calibration.cpu is not None:
        cpu = Overhead(
            min(calibration.cpu.typical, trusted.most_cpu_overhead),
            min(calibration.cpu.wander, trusted.most_cpu_wander),
        )
        by_round = {r: min(o, trusted.most_cpu_overhead_in(r)) for r, o in calibration.cpu.by_round.items()}
    return Believed(wall, cpu, capped, stalled, by_round)


def skipped_work(calibration: Calibration, trusted: TrustedBounds, believed: Believed, around: float) -> list[str]:
    """On the CPU-time clock: where the candidate's process did less harness work around its
    null calls than the baselines' process does around the same calls, or around its timed
    calls (`around` a call) than around its own null calls."""
    skipped: list[str] = []
    if calibration.cpu is None or believed.cpu is None:
        return skipped
    own = calibration.cpu.typical
    if trusted.cpu is not None and own < SKIPPED_NULL_SHARE * trusted.cpu.typical - NULL_TRUST_US:
        skipped.append(
            f"its process spent {own:.0f} us of harness work around each call that ran none "
            f"of its code, where the baselines' process spent {trusted.cpu.typical:.0f} us"
        )
    if around < SKIPPED_REAL_SHARE * believed.cpu.typical - NULL_TRUST_US:
        skipped.append(
            f"its process spent {around:.0f} us of harness work around each timed call, where it "
            f"spent {believed.cpu.typical:.0f} us around each call that ran none of its code"
        )
    return skipped


# -- 3. the per-block bounds and the blocks held to them -------------------------------------------


def block_bounds(cand: Sequence[wire.Block], clock: Clock) -> list[float]:
    """Each candidate block's bound on its mean call time: its time per call on the clock, less
    the believed overhead and what the clock cannot resolve, discounted by BOUND_SLACK so noise
    never overrules an honest claim, while a claim several times too small always is (0 for a
    block the clock did not time). No block's bound is above the median block's: the host stalls
    now and then for a few hundred µs (a collection, an interrupt), in real and null blocks
    alike, and a stall in a real block is not the kernel's work. Work a kernel hides from its
    claims is in every block, so the median bound still holds a forged claim to it."""
    bounds = []
    for b in cand:
        seen = clock.per_call(b)
        bounds.append((seen - clock.overhead_around(b) - clock.resolution) / BOUND_SLACK if seen is not None else 0.0)
    typical = statistics.median(bounds) if bounds else 0.0
    return [min(bound, typical) for bound in bounds]


@dataclass(frozen=True)
class HeldBlocks:
    """The candidate's blocks as believed: their claims, or their bounds where claims fell below."""

    times: list[float]  # each candidate block's time per call (µs)
    held: list[int]  # the blocks whose claims fell below their bound, which was used instead


def hold_to_bounds(cand: Sequence[wire.Block], bounds: Sequence[float], idle_gap: float) -> HeldBlocks:
    """A block's time is the median of its calls' claims, unless their mean is below the block's
    bound: then the bound. No call is believed below MIN_CALL_US."""
    held: list[int] = []
    times: list[float] = []
    for i, (b, bound) in enumerate(zip(cand, bounds)):
        claims = call_times(b, idle_gap)
        claimed = statistics.median(claims)
        if bound > statistics.fmean(claims) * 1.02 + 0.5:
            held.append(i)
            claimed = max(claimed, bound)
        times.append(max(claimed, MIN_CALL_US))
    return HeldBlocks(times, held)


# -- 4. the resolution: whether the clock can check the kernel's claims at all ---------------------


@dataclass(frozen=True)
class Resolution:
    """Whether the harness's clock can check the kernel's claims: what it sees against what it
    cannot tell apart."""

    outside: float  # the clock's time per call beyond the believed overhead (inf: no block timed on it)
    resolution: float  # what the clock cannot tell apart per call
    # On the CPU-time clock, where each block is paired with its round's null block: what the
    # clock cannot tell apart in the median over the window's blocks (the per-block resolution
    # over the square root of their number); the per-block one elsewhere.
    window_resolution: float | None = None

    @property
    def below(self) -> bool:
        """Below RESOLVED times the resolution, the bound cannot hold a forged claim at all: the
        clock does not resolve the kernel, and its claims cannot be checked."""
        limit = self.resolution if self.window_resolution is None else self.window_resolution
        return self.outside < RESOLVED * limit

    def window_bound(self) -> float | None:
        """On the paired CPU-time clock: the bound on the candidate's median call time from the
        whole window, `(outside - window_resolution) / WINDOW_SLACK` (None elsewhere). The harness
        work around a call wanders by about as much as a small kernel takes from one block to the
        next, on a shared machine, so each block's own bound falls away; over twenty paired blocks
        the median does not, and it holds a forged claim as a block's bound would."""
        if self.window_resolution is None or not math.isfinite(self.outside):
            return None
        return (self.outside - self.window_resolution) / WINDOW_SLACK


def resolve(cand: Sequence[wire.Block], clock: Clock) -> Resolution:
    """What the clock says a call took beyond the harness's own work, and what it cannot tell apart."""
    seen = [t - clock.overhead_around(b) for b in cand if (t := clock.per_call(b)) is not None]
    outside = statistics.median(seen) if seen else float("inf")
    window = None
    if clock.by_round is not None and len(seen) > 1:
        window = clock.resolution / math.sqrt(len(seen))
    return Resolution(outside, clock.resolution, window)


def hold_to_window(held: HeldBlocks, resolution: Resolution) -> HeldBlocks:
    """Every block's time raised to the window's bound where the candidate's claims fall below it
    (see Resolution.window_bound); the blocks raised are held too."""
    return _raise_to(held, resolution.window_bound())


def _raise_to(held: HeldBlocks, bound: float | None) -> HeldBlocks:
    """Every block's time raised to `bound` where the median claim falls below it; the blocks
    raised are held too."""
    if bound is None or statistics.median(held.times) * 1.02 + 0.5 >= bound:
        return held
    raised = [i for i, t in enumerate(held.times) if t < bound]
    return HeldBlocks([max(t, bound) for t in held.times], sorted(set(held.held) | set(raised)))


# -- 4b. bursts: the clock that resolves short kernels ---------------------------------------------

# A burst of the candidate's process around a stand-in (its null burst) is believed up to
# BURST_NULL_TRUST times the baselines' process's null burst of the same calls, plus
# BURST_NULL_TRUST_US a call: a process stalling on purpose in its null bursts would make its
# kernel's calls look shorter than they are.
BURST_NULL_TRUST, BURST_NULL_TRUST_US = 1.25, 3.0


@dataclass(frozen=True)
class BurstBound:
    """What the bursts say about the candidate's calls (µs a call): timed from outside, less the
    believed null burst, with what they cannot tell apart."""

    outside: float  # the median round's candidate burst less its believed null burst, a call
    resolution: float  # three times those rounds' null bursts' median deviation, or a share of them
    null_us: float  # the believed null burst, a call (median over the rounds)
    capped: bool  # the candidate process's null bursts showed more than is believed
    rounds: int
    calls: int  # calls in each burst

    @property
    def below(self) -> bool:
        """The bursts do not resolve the kernel either."""
        return self.outside < RESOLVED * self.resolution

    @property
    def bound(self) -> float:
        """The bound on the candidate's time a call: `(outside - resolution) / BOUND_SLACK`."""
        return (self.outside - self.resolution) / BOUND_SLACK


_BURST_CPU_KEYS = ("candidate_cpu_us", "null_cpu_us", "base_null_cpu_us")


def resolve_bursts(bursts: Sequence[wire.Burst]) -> BurstBound | None:
    """The bursts' bound (None without bursts). Each round's null is the candidate process's own,
    capped by the baselines' process's (BURST_NULL_TRUST). Where every burst was also read on
    its process's CPU-time clock (the CPU with one thread), that clock: other programs taking
    the core inflate none of it."""
    rows = [b for b in bursts if int(b.get("n") or 0) > 0]
    if not rows:
        return None
    cpu = all(all(k in b for k in _BURST_CPU_KEYS) for b in rows)
    keys = _BURST_CPU_KEYS if cpu else ("candidate_us", "null_us", "base_null_us")
    outside, nulls = [], []
    capped = False
    for b in rows:
        n = int(b["n"])
        seen = {k: float(b[k]) / n for k in keys}  # type: ignore[literal-required]
        own, trusted = seen[keys[1]], seen[keys[2]]
        most = BURST_NULL_TRUST * trusted + BURST_NULL_TRUST_US
        capped = capped or own > most
        believed = min(own, most)
        nulls.append(believed)
        outside.append(seen[keys[0]] - believed)
    null = statistics.median(nulls)
    wander = 3.0 * statistics.median([abs(x - null) for x in nulls])
    return BurstBound(
        outside=statistics.median(outside),
        resolution=max(wander, BOUND_RESOLUTION * null),
        null_us=null,
        capped=capped,
        rounds=len(rows),
        calls=int(rows[0]["n"]),
    )


def hold_to_bursts(held: HeldBlocks, bursts: BurstBound | None) -> HeldBlocks:
    """Every block's time raised to the bursts' bound where the candidate's claims fall below it;
    the blocks raised are held too."""
    return _raise_to(held, bursts.bound if bursts is not None else None)


# -- 5. the paired ratios and their bootstrap ------------------------------------------------------


@dataclass(frozen=True)
class Ratios:
    """Each side's time (the median over the rounds) and the speedups with their intervals."""

    rounds: int  # rounds every side has a block in
    candidate_us: float
    versus: dict[str, Versus]  # by baseline, in BASELINES order

    @property
    def best(self) -> str:
        """The fastest baseline (the lowest median time; eager on a tie)."""
        return min(self.versus, key=lambda side: (self.versus[side].us, BASELINES.index(side)))


def paired_ratios(baselines: dict[str, Sequence[wire.Block]], cand_times: Sequence[float], seed: int) -> Ratios:
    """Each round's ratio pairs blocks timed next to each other, so whatever slowed the machine
    during that round (a neighbour on the host, a burst on the other core) slows both sides of
    it and cancels; a ratio of medians taken across the window would carry it instead. A speedup
    is the median of its rounds' ratios, its interval a bootstrap over the rounds. The baselines'
    blocks are trusted: their time is the median of their own events."""
    times = {side: [statistics.median(b["events_us"]) for b in blocks] for side, blocks in baselines.items()}
    rounds = min([len(cand_times), *(len(t) for t in times.values())])
    cand = list(cand_times[:rounds])
    versus: dict[str, Versus] = {}
    for side, side_times in times.items():
        per_round = [paired_ratio(b, k) for b, k in zip(side_times[:rounds], cand)]
        versus[side] = Versus(
            us=statistics.median(side_times[:rounds]),
            speedup=statistics.median(per_round),
            interval=percentile_interval(bootstrap_medians(per_round, seed)),
        )
    return Ratios(rounds=rounds, candidate_us=statistics.median(cand), versus=versus)


# -- the window ------------------------------------------------------------------------------------


def side_by_side(blocks: wire.SideBlocks, seed: int = 0, bursts: Sequence[wire.Burst] = ()) -> SideBySide:
    """Times and ratios from one window of interleaved blocks (tools/controller.py).

    Baseline blocks are trusted: their time is the median of their own events. The candidate's
    events are its process's claim; the harness's clock timed each block from outside, and
    `(block / calls - overhead - max(wander, BOUND_RESOLUTION * overhead)) / BOUND_SLACK` bounds
    the candidate's mean call time from below, where the overhead (fresh inputs, the flush, the
    op guard, the synchronizes, the evidence, the round trip) is the median per call that the
    null blocks of the candidate's own process showed beyond their events (the baseline blocks'
    when there are none), and the wander three times its median deviation. A call's claim is
    its events, or the time until the device was idle when work escaped them; a block's time is
    the median of its claims, unless the mean claim is below the bound: then the bound. Where
    every block carries the candidate process's CPU time (`cpu_us`: the CPU with one thread),
    the bound is drawn from that clock instead, with CPU_BOUND_RESOLUTION. Each ratio is the
    median over the rounds of the round's baseline block time over its candidate block time,
    with a bootstrap 95% interval over the rounds.

    The steps: `calibrate` the candidate process's overhead, believe it only as far as the
    `trusted_bounds` allow (`believe`), bound each block and hold those whose claims fall below
    (`block_bounds`, `hold_to_bounds`), say whether the clock resolves the kernel at all
    (`resolve`), and pair the rounds' blocks into ratios with their bootstrap (`paired_ratios`).
    Where the window was followed by bursts (`bursts`: kernels too short for its calls), their
    bound holds the claims too (`resolve_bursts`, `hold_to_bursts`), and the kernel is resolved
    where either clock resolves it.
    """
    cand = blocks["candidate"]
    eager = blocks["eager"]
    calibration = calibrate(blocks)
    trusted = trusted_bounds(blocks, cpu_clock=calibration.cpu is not None)
    believed = believe(calibration, trusted)
    # On the CPU-time clock: the harness work around the candidate's timed calls, against its
    # null calls' and the baselines' process's.
    around: float | None = None
    skipped: list[str] = []
    if calibration.cpu is not None:
        around = statistics.median([_around_cpu(b) for b in cand])
        skipped = skipped_work(calibration, trusted, believed, around)
    clock = believed.clock
    bounds = block_bounds(cand, clock)
    resolution = resolve(cand, clock)
    burst = resolve_bursts(bursts)
    held = hold_to_bursts(hold_to_window(hold_to_bounds(cand, bounds, calibration.idle_gap), resolution), burst)
    # Where torch.compile could not be used, eager stands in for it (the result says so).
    timed = {side: blocks.get(side) or [] for side in BASELINES}
    timed["compile"] = timed["compile"] or eager
    ratios = paired_ratios({side: b for side, b in timed.items() if b}, held.times, seed)
    detail = _detail(blocks, calibration, trusted, believed, bounds, held, resolution, skipped, around)
    if burst is not None:
        detail.update(
            below_resolution=resolution.below and burst.below,
            window_below_resolution=resolution.below,
            burst_outside_us=round(burst.outside, 2),
            burst_resolution_us=round(burst.resolution, 2),
            burst_bound_us=round(burst.bound, 2),
            burst_null_us=round(burst.null_us, 2),
            burst_null_capped=burst.capped,
            burst_rounds=burst.rounds,
            burst_calls=burst.calls,
        )
        if resolution.below and not burst.below:
            # What the driver's message names: the clock that resolved it.
            detail.update(outside_us=round(burst.outside, 2), resolution_us=round(burst.resolution, 2))
    e, c = ratios.versus["eager"], ratios.versus["compile"]
    return SideBySide(
        eager_us=e.us,
        compile_us=c.us,
        candidate_us=ratios.candidate_us,
        speedup_vs_eager=e.speedup,
        speedup_vs_compile=c.speedup,
        eager_interval=e.interval,
        compile_interval=c.interval,
        versus=ratios.versus,
        best=ratios.best,
        trials=sum(b["n"] for b in cand[: ratios.rounds]),
        clamped_blocks=len(held.held),
        overhead_us=believed.wall.typical,
        detail=detail,
    )


def _median_of(side: Sequence[wire.Block], key: Literal["events_us", "walls_us"]) -> float | None:
    values = [v for b in side for v in b.get(key) or []]
    return round(statistics.median(values), 2) if values else None


def _side_record(side: Sequence[wire.Block]) -> dict[str, Any]:
    """Where one side's time per call went, as medians (µs)."""
    found = {
        "events_us": _median_of(side, "events_us"),
        "device_idle_us": _median_of(side, "walls_us"),
        "block_per_call_us": round(statistics.median([_per_call_block(b) for b in side]), 2),
    }
    if all("cpu_us" in b for b in side):
        found["cpu_per_call_us"] = round(statistics.median([_per_call_cpu(b) for b in side]), 2)
    return found


def _detail(
    blocks: wire.SideBlocks,
    calibration: Calibration,
    trusted: TrustedBounds,
    believed: Believed,
    bounds: Sequence[float],
    held: HeldBlocks,
    resolution: Resolution,
    skipped: list[str],
    around: float | None,
) -> dict[str, Any]:
    """The window's record (SideBySide.detail): each side's medians, then every step's numbers."""
    cand, eager = blocks["candidate"], blocks["eager"]
    sides = (
        ("eager", eager),
        ("compile", blocks.get("compile") or eager),
        ("autotune", blocks.get("autotune") or []),
        ("graphs", blocks.get("graphs") or []),
        ("candidate", cand),
        ("null", blocks.get("null") or []),
        ("base_null", blocks.get("base_null") or []),
    )
    detail: dict[str, Any] = {name: _side_record(side) for name, side in sides if side}
    detail.update(
        overhead_us=round(believed.wall.typical, 2),
        wander_us=round(believed.wall.wander, 2),
        idle_gap_us=round(calibration.idle_gap, 2),
        clamped_blocks=len(held.held),
        candidate_blocks=len(cand),
        null_capped=believed.capped,
        null_stalled=believed.stalled,
        block_bounds_us=[round(x, 1) for x in bounds],
        held_blocks=held.held,
        outside_us=round(resolution.outside, 2) if math.isfinite(resolution.outside) else None,
        resolution_us=round(resolution.resolution, 2),
        window_resolution_us=(
            round(resolution.window_resolution, 2) if resolution.window_resolution is not None else None
        ),
        below_resolution=resolution.below,
        trusted_overhead_us=round(trusted.wall.typical if trusted.wall else 0.0, 2),
        skipped_work=skipped,
    )
    if calibration.cpu is not None and believed.cpu is not None and around is not None:
        # Around each call, before any cap: its timed calls, its null calls (what the skipped-work
        # rule compares; benchmarks/harness_work.py).
        detail.update(
            cpu_overhead_us=round(believed.cpu.typical, 2),
            cpu_wander_us=round(believed.cpu.wander, 2),
            candidate_cpu_per_call_us=round(statistics.median([_per_call_cpu(b) for b in cand]), 2),
            cpu_around_timed_us=round(around, 2),
            cpu_around_null_us=round(calibration.cpu.typical, 2),
            cpu_null_wander_us=round(calibration.cpu.wander, 2),
        )
        if trusted.cpu is not None:
            detail.update(
                trusted_cpu_overhead_us=round(trusted.cpu.typical, 2),
                trusted_cpu_wander_us=round(trusted.cpu.wander, 2),
            )
    return detail


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
