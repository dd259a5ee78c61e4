"""Review flags on a timed result: a speedup beyond belief, a time below the memory roofline."""

from __future__ import annotations

REVIEW_SPEEDUP = 10.0


def review_warnings(
    speedup_vs_eager: float, speedup_vs_compile: float, candidate_us: float, floor_us: float | None
) -> list[str]:
    """Results too good to trust without a look: flagged for review, not failed."""
    out: list[str] = []
    best = max(speedup_vs_eager, speedup_vs_compile)
    if best > REVIEW_SPEEDUP:
        out.append(f"speedup_review: {best:.1f}x is beyond {REVIEW_SPEEDUP:.0f}x; check the kernel does all the work")
    if floor_us is not None and candidate_us < 0.8 * floor_us:
        out.append(
            f"speedup_review: {candidate_us:.1f} us is below the memory roofline floor of {floor_us:.1f} us "
            "for reading the inputs once"
        )
    return out
