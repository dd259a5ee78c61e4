"""Bursts: back-to-back calls timed from outside, which resolve kernels too short for the window's
calls (tools/timing.py, tools/bursts.py, harness/clock_stats.py).

The numbers in the windows below are the H200's (docs/benchmarks.md): about 2.2 ms of harness
work around each window call, wandering by a few hundred µs, and a few µs around each burst call.
"""

from __future__ import annotations

import sys

from cuda_agent_cli.harness.clock_stats import BURST_NULL_TRUST, resolve_bursts, side_by_side
from cuda_agent_cli.resources import tools_dir

sys.path.insert(0, str(tools_dir()))  # the locked job modules import each other by name
from bursts import burst_checks, burst_size  # noqa: E402


def _block(round_: int, events: list[float], block_us: float) -> dict:
    return {"round": round_, "events_us": events, "walls_us": events, "block_us": block_us, "n": len(events)}


def _unresolved_window(claim: float) -> dict:
    """The CUDA demo as the H200 read it: 34 µs calls beside 2.2 ms of harness work whose null
    blocks wander by 400 µs, so the window alone cannot check any claim."""
    nulls = [2200.0, 2650.0, 1900.0, 2300.0, 2150.0, 2600.0, 1950.0, 2250.0]
    seen = [2240.0, 2200.0, 2500.0, 1950.0, 2600.0, 2230.0, 2000.0, 2280.0]
    w: dict[str, list[dict]] = {"eager": [], "compile": [], "candidate": [], "null": []}
    for r in range(8):
        w["eager"].append(_block(r, [132.0] * 4, 4 * 2330.0))
        w["compile"].append(_block(r, [63.0] * 4, 4 * 2260.0))
        w["candidate"].append(_block(r, [claim] * 4, 4 * seen[r]))
        w["null"].append(_block(r, [1.3] * 4, 4 * nulls[r]))
    return w


def _bursts(kernel_us: float, null_us: float = 12.0, base_null_us: float = 11.0, n: int = 128) -> list[dict]:
    """Eight rounds of bursts: each call of the candidate's burst takes its kernel beside the
    harness's few µs (a call, its synchronize), its null burst those µs alone."""
    jitter = [0.0, 0.3, -0.2, 0.1, -0.3, 0.2, 0.0, -0.1]
    return [
        {
            "round": r,
            "n": n,
            "candidate_us": n * (kernel_us + null_us + 2.0 + jitter[r]) + 60.0,
            "null_us": n * (null_us + jitter[r]) + 60.0,
            "base_null_us": n * (base_null_us + jitter[r]) + 60.0,
        }
        for r in range(8)
    ]


def test_a_burst_is_sized_to_the_claim_and_the_memory_it_may_hold() -> None:
    assert burst_size(34.0, 8 << 20) == 128  # as many as 1 GiB holds
    assert burst_size(34.0, 1 << 20) == 256  # at most BURST_MOST
    assert 10 <= burst_size(1500.0, 1 << 20) <= 20  # about 20 ms of calls
    assert burst_size(5000.0, 1 << 20) == 0  # the window's calls resolve such a kernel
    assert burst_size(5.0, 600 << 20) == 0  # fewer than BURST_LEAST fit


def test_the_bursts_checks_catch_a_kernel_wrong_on_one_call_in_five_nearly_surely() -> None:
    for k in (4, 13, 21, 64, 256):
        ms, miss = burst_checks(k, 8, 5, 0.99)
        assert len(ms) == 8 and all(1 <= m <= k for m in ms) and miss <= 0.01
        assert max(ms) - min(ms) <= 1
    # The fewest in all: 21-call bursts (5 wrong calls each) need 2 checks in seven bursts and 3
    # in one (0.8% missed), not 3 in every burst.
    ms, miss = burst_checks(21, 8, 5, 0.99)
    assert sorted(ms) == [2] * 7 + [3] and 0.005 < miss <= 0.01


def test_where_outputs_are_large_fewer_burst_calls_are_checked_and_the_odds_say_so() -> None:
    ms, miss = burst_checks(21, 8, 5, 0.99, most=1)
    assert ms == [1] * 8 and 0.05 < miss < 0.2  # (16/21) ** 8
    assert burst_checks(21, 8, 5, 0.99, most=0)[0] == [1] * 8  # never none


def test_bursts_resolve_the_short_kernel_the_window_cannot() -> None:
    window_only = side_by_side(_unresolved_window(34.0))
    assert window_only.detail["below_resolution"]
    stats = side_by_side(_unresolved_window(34.0), bursts=_bursts(34.0))
    assert not stats.detail["below_resolution"] and stats.detail["window_below_resolution"]
    assert stats.clamped_blocks == 0 and stats.candidate_us == 34.0
    assert 30.0 < stats.detail["burst_outside_us"] < 40.0 and stats.detail["burst_resolution_us"] < 2.0
    assert stats.speedup_vs_eager > 3.5


def test_a_claim_the_bursts_contradict_is_held_to_their_bound() -> None:
    # Claims 3 µs for 34 µs of work: the window cannot tell; the bursts can.
    stats = side_by_side(_unresolved_window(3.0), bursts=_bursts(34.0))
    assert stats.clamped_blocks == 8 and stats.candidate_us > 20.0


def test_a_process_that_stalls_in_its_null_bursts_is_believed_only_up_to_the_baselines() -> None:
    # Its null bursts read 30 µs a call where the baselines' process reads 11: its kernel's
    # calls would look 18 µs shorter than they are.
    stalled = resolve_bursts(_bursts(34.0, null_us=30.0, base_null_us=11.0))
    assert stalled is not None and stalled.capped
    assert stalled.null_us <= BURST_NULL_TRUST * 12.0 + 3.0 and stalled.outside > 34.0
    honest = resolve_bursts(_bursts(34.0))
    assert honest is not None and not honest.capped


def test_bursts_that_do_not_resolve_the_kernel_either_leave_it_uncertain() -> None:
    # A kernel whose calls take no longer than the stand-in's, within what the bursts wander.
    noisy = _bursts(0.0)
    for r, row in enumerate(noisy):
        row["null_us"] += 128 * 4.0 * (1 if r % 2 else -1)
    stats = side_by_side(_unresolved_window(0.5), bursts=noisy)
    assert stats.detail["below_resolution"]
