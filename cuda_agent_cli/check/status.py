"""Check statuses, the order in which one status wins over another, the exit code, and the
noise-aware comparison of a measured speedup with the recorded one. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from cuda_agent_cli.errors import BadInput


class Status(str, Enum):
    OK = "OK"
    STALE = "STALE"
    BROKEN = "BROKEN"
    REGRESSED = "REGRESSED"
    SLOWER_THAN_COMPILE = "SLOWER-THAN-COMPILE"
    NEW_ARCH = "NEW-ARCH"
    NOT_MEASURED = "NOT-MEASURED"
    IMPROVED = "IMPROVED"


# The status a kernel gets is the first of its findings in this order: what is certain and
# needs a human first, what could not be looked at last but never hidden behind OK.
PRECEDENCE = (
    Status.BROKEN,
    Status.STALE,
    Status.NEW_ARCH,
    Status.SLOWER_THAN_COMPILE,
    Status.REGRESSED,
    Status.NOT_MEASURED,
    Status.IMPROVED,
    Status.OK,
)
FAILING = frozenset({Status.STALE, Status.BROKEN, Status.REGRESSED, Status.SLOWER_THAN_COMPILE, Status.NEW_ARCH})

MEANING = {
    Status.OK: "verified, current and as fast as recorded",
    Status.STALE: "the reference class, its call signature or its verified inputs changed since it was verified",
    Status.BROKEN: "it fails verification, or its sources are missing or were edited by hand",
    Status.REGRESSED: "its speedup is significantly below the recorded one",
    Status.SLOWER_THAN_COMPILE: "it is now slower than torch.compile",
    Status.NEW_ARCH: "it was verified on another GPU architecture or another torch/CUDA version than this machine's",
    Status.NOT_MEASURED: "the checks it needs cannot run on this machine",
    Status.IMPROVED: "it is significantly faster than recorded (refresh the record with `cuda-agent check --update`)",
}

DEFAULT_THRESHOLD = 0.05
IMPROVED_BY = 0.10


@dataclass(frozen=True)
class Finding:
    status: Status
    message: str
    file: str | None = None  # repository-relative, for annotations
    line: int | None = None
    code: str = ""  # a stable name for the kind of finding ("no-hashes", "source-edited", ...)


def decide(findings: list[Finding]) -> Status:
    """The kernel's one status: the first finding's status in PRECEDENCE order, else OK."""
    present = {f.status for f in findings}
    return next((s for s in PRECEDENCE if s in present), Status.OK)


def exit_code(statuses: list[Status], strict: bool = False) -> int:
    """0 all OK (IMPROVED and NOT-MEASURED count as OK unless strict); 1 any failing status."""
    failing = set(FAILING) | ({Status.NOT_MEASURED} if strict else set())
    return 1 if any(s in failing for s in statuses) else 0


def parse_threshold(value: Any, source: str) -> float:
    """0.05, "0.05" or "5%" -> 0.05; BadInput for anything outside (0, 1)."""
    text = str(value).strip()
    try:
        number = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise BadInput(
            f"{source}: threshold must be a fraction like 0.05 or a percentage like 5%, got {value!r}", "fix the value"
        ) from None
    if not 0.0 < number < 1.0:
        raise BadInput(f"{source}: threshold must lie between 0 and 1 (0%-100%), got {value!r}", "fix the value")
    return number


def _interval(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(x, (int, float)) for x in value):
        lo, hi = float(value[0]), float(value[1])
        return (lo, hi) if lo <= hi else (hi, lo)
    return None


@dataclass(frozen=True)
class Comparison:
    verdict: str  # "regressed" | "improved" | "same"
    change: float  # measured / recorded - 1
    limit: float  # the relative change that counts here (see compare)
    significant: bool  # the intervals (where known) do not overlap
    detail: str = field(default="")


def compare(
    recorded: float,
    recorded_interval: Any,
    measured: float,
    measured_interval: Any,
    threshold: float = DEFAULT_THRESHOLD,
) -> Comparison:
    """Whether `measured` is significantly below (or above) `recorded`.

    Regressed: the drop exceeds the threshold and 3 x the measured spread taken as a factor
    (below recorded / (1 + 3 x spread)), and the intervals do not overlap. Improved: the gain
    exceeds max(10%, 3 x spread), again without overlap. The spread is the measured interval's half-width relative to the measured value; without an interval,
    only the threshold applies (the detail says so)."""
    rec_iv, mea_iv = _interval(recorded_interval), _interval(measured_interval)
    spread = (mea_iv[1] - mea_iv[0]) / (2.0 * measured) if mea_iv and measured > 0 else 0.0
    change = measured / recorded - 1.0 if recorded > 0 else 0.0
    note = "" if mea_iv else " (no interval measured: threshold only)"
    # The spread bounds the drop as a factor, recorded / (1 + 3 x spread): a relative drop never
    # exceeds 100%, so with a wide interval (a busy machine) "3 x spread" alone would let a kernel
    # fall from 1000x to 5x unnoticed.
    drop_limit = max(threshold, 1.0 - 1.0 / (1.0 + 3 * spread))
    gain_limit = max(IMPROVED_BY, 3 * spread)
    m_lo, m_hi = mea_iv if mea_iv else (measured, measured)
    r_lo, r_hi = rec_iv if rec_iv else (recorded, recorded)
    if -change > drop_limit:
        significant = m_hi < r_lo
        return Comparison("regressed" if significant else "same", change, drop_limit, significant, note)
    if change > gain_limit:
        significant = m_lo > r_hi
        return Comparison("improved" if significant else "same", change, gain_limit, significant, note)
    return Comparison("same", change, drop_limit, False, note)


def slower_than_compile(measured_interval: Any, measured: float, recorded: Any, recorded_interval: Any) -> bool:
    """The measured interval against torch.compile lies below 1.0, where the record did not."""
    iv = _interval(measured_interval)
    hi = iv[1] if iv else measured
    if hi >= 1.0:
        return False
    rec_iv = _interval(recorded_interval)
    rec_hi = rec_iv[1] if rec_iv else (recorded if isinstance(recorded, (int, float)) else None)
    # A kernel applied while slower than torch.compile (faster than eager only) was accepted so.
    return rec_hi is None or rec_hi >= 1.0
