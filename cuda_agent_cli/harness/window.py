"""What a profile's timing window becomes: times, ratios with their intervals, the method,
and every warning a reader of the numbers needs.

The controller hands back raw blocks (tools/controller.py); the statistics are the clock's
(harness/clock_stats.py); here they become the result's `Timings`, its `timing_detail`, and the
warnings for what the clock had to overrule, what was unavailable and what the machine did.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from cuda_agent_cli.harness import clock_stats, review, reward, roofline, wire
from cuda_agent_cli.harness_result import Check, HarnessResult, Timings

# Cores other processes may keep busy around a window before its numbers carry a warning.
_LOAD_WARNING_CORES = 0.3


def read_window(
    result: HarnessResult,
    info: wire.EvaluateResult,
    claims: wire.Claims,
    input_bytes: int,
    *,
    threads: int | None,
    reward_baseline: str,
    peaks: roofline.MachinePeaks,
) -> None:
    """The window's blocks into `result`: times, ratios with their intervals, the method, and
    every warning a reader of the numbers needs (what was held, what was unavailable)."""
    device = result.device
    window = info.get("timing")
    if not window or not (window.get("blocks") or {}).get("candidate"):
        result.checks.append(Check("crash", False, "the candidate produced no timings"))
        return
    blocks = window["blocks"]
    base_info = info.get("baselines_info")
    if base_info and "compile_error" in base_info:
        result.warnings.append(
            f"torch.compile baseline unavailable, eager time used instead: {str(base_info['compile_error'])[:200]}"
        )
    stats = clock_stats.side_by_side(blocks, bursts=window.get("bursts") or ())
    skipped = stats.detail.get("skipped_work") or []
    if skipped:
        result.checks.append(
            Check(
                "harness_integrity",
                False,
                "part of the harness's work around each call was "
                f"skipped in the candidate's process: {'; '.join(skipped)}",
            )
        )
    # Whether this round's baselines came from the warm service (rounds: how many it has timed).
    result.timing_detail = {
        **stats.detail,
        "baselines": window.get("baselines_ready") or {},
        "pinned_cpu": window.get("pinned_cpu"),
        "trusted_retries": window.get("trusted_retries") or [],
        "trusted_device_ratios": _device_ratios(blocks),
    }
    method = timing_method(
        device,
        int(window.get("trials", 0)),
        int(window.get("warmup", 0)),
        int(window.get("block", 0)),
        threads,
    )
    detection = info.get("detection")
    if detection and detection.get("checked"):
        checked = (
            f"{detection['checked']} of {detection['timed']} timed calls checked, chosen after they "
            f"returned (a kernel wrong on one call in {detection['one_in']} is caught with probability "
            f"{detection['probability']:.3f})"
        )
        burst = detection.get("bursts")
        if burst and burst.get("checked"):
            checked += (
                f"; {stats.detail.get('burst_rounds')} bursts of {stats.detail.get('burst_calls')} "
                f"back-to-back calls, {burst['checked']} of {burst['timed']} checked ({burst['probability']:.3f})"
            )
        head, sep, tail = method.rpartition("; median of")
        method = f"{head}; {checked}{sep}{tail}" if sep else f"{method}; {checked}"
        result.timing_detail["detection"] = detection
    result.timings = Timings(
        stats.eager_us,
        stats.compile_us,
        stats.candidate_us,
        stats.speedup_vs_eager,
        stats.speedup_vs_compile,
        method,
        stats.trials,
        speedup_vs_eager_interval=stats.eager_interval,
        speedup_vs_compile_interval=stats.compile_interval,
        uncertain=reward.uncertain(stats.eager_interval, _reward_versus(stats, reward_baseline).interval),
        baselines={
            side: {
                "us": round(v.us, 3),
                "speedup": round(v.speedup, 4),
                "interval": [round(x, 4) for x in v.interval],
            }
            for side, v in stats.versus.items()
        },
        best_baseline=stats.best,
        speedup_vs_best=stats.versus[stats.best].speedup,
        speedup_vs_best_interval=stats.versus[stats.best].interval,
        reward_baseline=reward_baseline,
        **_roofline(result, stats, base_info, peaks),
    )
    errors: dict[str, str] = (base_info.get("baseline_errors") or {}) if base_info else {}
    for side, why in errors.items():
        if side != "compile":  # said above, with eager standing in
            result.warnings.append(
                f"{clock_stats.BASELINE_NAMES.get(side, side)} baseline unavailable, not timed: {str(why)[:200]}"
            )
    gap = float(stats.detail.get("idle_gap_us") or 0.0)
    escaped = sum(
        1 for b in blocks["candidate"] for t, e in zip(clock_stats.call_times(b, gap), b["events_us"]) if t != e
    )
    if escaped:
        result.warnings.append(
            f"speedup_review: in {escaped} timed call(s) the device stayed busy well past the "
            "kernel's own events (work on another stream?); the time until it was idle was used"
        )
    # Where the harness's clock had to overrule the kernel's claims, or cannot check them at
    # all, the claims decide nothing: the result is uncertain and its reward held at 1.
    held: list[str] = []
    if stats.clamped_blocks * 2 >= len(blocks["candidate"]):
        held.append(
            f"the kernel's own clock read less than the harness's clock allows in {stats.clamped_blocks} "
            f"of {len(blocks['candidate'])} blocks; the harness's bound was used"
        )
    if stats.detail.get("null_stalled"):
        held.append(
            "the candidate's process took far longer around calls that ran none of its code than the "
            "baselines' processes did; the baselines' overhead was used"
        )
    if stats.detail.get("below_resolution"):
        held.append(
            f"the harness's clock does not resolve this kernel: {stats.detail.get('outside_us')} us a call "
            f"beyond the harness's own work, against {stats.detail.get('resolution_us')} us it cannot tell "
            "apart, so the kernel's own claims cannot be checked"
        )
    for why in held:
        result.warnings.append(f"timing_bound: {why}; the reward is held at 1")
    if held:
        result.timing_detail["reward_held"] = True
        result.timings = dataclasses.replace(result.timings, uncertain=True)
    if base_info and base_info.get("recompiles_in_window"):
        result.warnings.append(
            f"torch.compile recompiled {base_info['recompiles_in_window']} time(s) while timed: "
            "its time may include compilation"
        )
    for label, cores in (("before", window.get("load_before")), ("during", window.get("load_during"))):
        if isinstance(cores, (int, float)) and cores > _LOAD_WARNING_CORES:
            result.warnings.append(
                f"machine_load: other processes kept {cores:.1f} core(s) busy {label} the "
                "timing window; the numbers may be off"
            )
    bandwidth = claims.get("bandwidth")
    floor = (input_bytes / bandwidth * 1e6) if bandwidth and input_bytes else None
    result.warnings.extend(
        review.review_warnings(stats.speedup_vs_eager, stats.speedup_vs_compile, stats.candidate_us, floor)
    )


def _reward_versus(stats: clock_stats.SideBySide, reward_baseline: str) -> clock_stats.Versus:
    """The baseline the reward's top step is decided against: default torch.compile (the
    paper's), or with --reward-baseline best the fastest baseline timed."""
    return stats.versus[stats.best if reward_baseline == "best" else "compile"]


def _roofline(
    result: HarnessResult,
    stats: clock_stats.SideBySide,
    base_info: wire.BaselinesInfo | None,
    peaks: roofline.MachinePeaks,
) -> dict[str, Any]:
    """The speed-of-light time and each side's fraction of it, where the baselines' process
    measured the reference's work; the machine's measured peaks are kept for later rounds."""
    measured_now = base_info.get("peaks") if base_info else None
    work = base_info.get("work") if base_info else None
    if measured_now and not peaks.known():
        peaks.keep(cast("dict[str, float]", measured_now))
    if not work or not work.get("flops") and not work.get("bytes"):
        return {}
    measured = cast("dict[str, float] | None", measured_now or peaks.known())
    peak = roofline.device_peak(result.environment.get("gpu"), str(work.get("dtype")), measured)
    if peak is None:
        return {}
    times = {side: v.us for side, v in stats.versus.items()}
    times["candidate"] = stats.candidate_us
    line = roofline.roofline(work, peak, times)
    return {"roofline": line, "fraction_of_peak": line["fractions"].get("candidate")}


def _device_ratios(blocks: wire.SideBlocks) -> list[float]:
    """How disturbed the device was while the baselines were timed (CUDA), for the record: each
    of their blocks' lead-ins and flushes against their calibrated times (the larger median)."""
    return [
        float(b["device_ratio"])
        for side in (*clock_stats.BASELINES, "base_null")
        for b in blocks.get(side) or []
        if isinstance(b.get("device_ratio"), (int, float))
    ]


def timing_method(device: str, trials: int, warmup: int, block: int, threads: int | None) -> str:
    side = f"eager, torch.compile and the kernel interleaved in blocks of {block}, bounded by the harness's clock"
    if device == "cuda":  # the flush and the lead-in are tools/timing.py's FLUSH_BYTES and LEAD_US
        return (
            f"cuda-events+device-sync+l2flush(256MB)+no-persisting-l2+fresh-inputs+lead-in(300us); {side}; "
            f"median of {trials} after {warmup} warm-up"
        )
    # One thread: each call is timed by its thread's CPU time (tools/timing.py, Caller).
    clock = "thread-cpu-time" if threads == 1 else "perf_counter"
    # The sweep through 1.5x the last-level cache before calls whose inputs take half the L2 or
    # more: tools/timing.py's CPU_FLUSH_FACTOR and Caller.flush_from.
    return (
        f"{clock}+fresh-inputs+fixed-malloc-threshold+llc-sweep(inputs from half the L2), {threads} thread(s) "
        f"each side; {side}; "
        f"median of {trials} after {warmup} warm-up"
    )
