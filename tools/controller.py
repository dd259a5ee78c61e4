"""Locked: the trusted process of one evaluation. It runs no candidate code and no model.

It forks the executors (the candidate's process, tools/candidate.py, and the baselines',
tools/baselines.py) before CUDA is initialized anywhere, talks to each over a channel made
before the fork (tools/peers.py), and decides everything a candidate could want to steer:

- which calls are made, with which input set and which seed, sent only when a block starts;
- the clock: every block of calls is timed here, from the request that carries its seeds to
  the reply, sent after the executor's last device-wide synchronize; and the candidate's
  processes are stopped (SIGSTOP) while a baseline block runs, so its threads can neither load
  the machine nor see the baselines' calls;
- which timed outputs are looked at: chosen at random after every timed call has returned and
  committed to its output's fingerprint;
- the load on the machine before and during the window, from /proc, for the record
  (tools/machine_load.py).

Eager, torch.compile and the candidate are timed side by side: rounds of one block each, in a
rotating order, all on the same inputs, followed by bursts where the calls are too short to
resolve (tools/bursts.py). What it hands back are raw numbers; the harness turns them into
times, ratios and intervals (harness/clock_stats.py). Beside this main line: the processes below it
(tools/process_tree.py), the pinning of the window's core (tools/pinning.py) and a process's
CPU-time clock (tools/cpu_clock.py).
"""

from __future__ import annotations

import math
import os
import secrets
import statistics
import time
from typing import Any

import channel
import wire
from bursts import run_bursts
from cpu_clock import cpu_us, process_cpu_clock
from machine_load import LoadMeter, idle_load
from peers import LentService, Peer, make_calls, spawn
from pinning import Pinning, callers
from process_tree import become_subreaper, kill_descendants, stray_processes, strays_error

# Call ids: verification calls count up from 0, timed ones from here (warm-up ones beyond).
TIMED_BASE = 1000
WARM_BASE = 100000
# The compiled baselines in the window's order (tools/baselines.py, COMPILED_SIDES).
BASELINE_SIDES = ("compile", "autotune", "graphs")
# A trusted block (eager, torch.compile, the baselines' null calls) whose lead-ins or flushes took
# more than DEVICE_SLOW times their calibrated time on the median (its `device_ratio`) is made
# again, up to TRUSTED_RETRIES times, after a pause of RETRY_PAUSE_S (growing) for what was left
# on the device to drain.
DEVICE_SLOW = 1.25
TRUSTED_RETRIES = 3
RETRY_PAUSE_S = 0.05


def weight_calls(n_verify: int) -> list[wire.Call]:
    """The calls after the harness changes a model's weights (tools/module_state.py): model 1 is
    given set 2's weights in place and called on set 2's inputs, then stepped as an optimizer
    would and called on set 3's. Model 0, which the timed calls use, is left as it was built."""
    if n_verify < 4:
        return []
    return [
        {"id": n_verify + 1, "model": 1, "set": 2, "seed": secrets.randbits(62), "weights": {"load": 2}},
        {
            "id": n_verify + 2,
            "model": 1,
            "set": 3,
            "seed": secrets.randbits(62),
            "weights": {"step": secrets.randbits(62)},
        },
    ]


def run_evaluate_job(spec: wire.EvaluateRequest) -> wire.EvaluateResult:
    import baselines
    import candidate

    result: wire.EvaluateResult = {"phases": {}}
    timeout = float(spec.get("call_timeout", 300))
    timed = spec.get("timing")
    n_verify = int(spec["n"])
    verify_calls: list[wire.Call] = [
        {"id": i, "model": i, "set": i, "seed": secrets.randbits(62)} for i in range(n_verify)
    ]
    again: wire.Call = {**verify_calls[0], "id": n_verify}  # the same call again: determinism
    result["verify_calls"] = verify_calls + [again] + weight_calls(n_verify)
    peers: list[Peer] = []
    become_subreaper()
    mark = time.perf_counter()
    try:
        base: Peer | None = None
        if timed:
            # Started first and ready before any candidate code exists: nothing of the candidate
            # can run while the reference builds its models.
            lent = spec.get("baselines_service")
            if lent:
                base = LentService(int(lent["pid"]), lent["fds"], timeout)
                base.open_round(spec)
            else:
                base = spawn("baselines", baselines.serve_baselines, spec, timeout)
            peers.append(base)
        if spec.get("go_file"):
            # Prepared beside the build; the candidate exists only once the build is done.
            go = _wait_for(spec["go_file"], float(spec.get("go_timeout", 3600)))
            if not go.get("compiled"):
                result["stage"] = "not_compiled"
                return result
            spec = {**spec, "module_dir": go.get("module_dir")}
        cand = spawn("candidate", candidate.serve_candidate, spec, timeout)
        peers.append(cand)
        ready = cand.chan.recv(timeout)
        if not ready.get("ok"):
            sent = ready.get("claims")
            claims: wire.Claims = sent if sent else {}
            result["claims"] = claims
            result["stage"] = "import"
            return result
        built = cand.ask({"op": "build", "models": list(range(n_verify))})
        if not built.get("ok"):
            result["claims"] = _finish(cand)
            result["stage"] = "run"
            return result
        result["phases"]["import"] = round(time.perf_counter() - mark, 4)
        mark = time.perf_counter()
        reply, _ = make_calls(cand, {"op": "calls", "calls": result["verify_calls"], "state": True})
        result["phases"]["seeds"] = round(time.perf_counter() - mark, 4)
        if not reply.get("ok"):
            result["claims"] = _finish(cand)
            result["stage"] = "run"
            return result
        commits: wire.Commits = {
            c["id"]: (fp, ev)
            for c, fp, ev in zip(result["verify_calls"], reply.get("fingerprints", []), reply.get("evidence", []))
        }
        cand.ask({"op": "checkpoint"})
        if spec["device"] == "cuda":
            mark = time.perf_counter()
            found = cand.ask({"op": "kernels"})
            result["cuda_kernels"] = found.get("names")
            result["cuda_kernels_error"] = found.get("error")
            result["phases"]["profiler"] = round(time.perf_counter() - mark, 4)
        checked: list[wire.Call] = []
        if timed and base is not None:
            cand.ask({"op": "checkpoint", "stage": "before_timing"})
            mark = time.perf_counter()
            window = _time_side_by_side(spec, cand, base, commits)
            if "error" in window:
                result["claims"] = _finish(cand)
                result.update(window)
                result["stage"] = "time"
                return result
            result["timing"] = window
            result["phases"]["baselines_wait"] = window.get("baselines_wait_s", 0.0)
            result["phases"]["baselines_prepare"] = (window.get("baselines_ready") or {}).get("prepare_s") or 0.0
            timed_calls = window.pop("calls")
            burst_checked = window.pop("burst_calls", [])
            # Chosen now, after every timed call has returned and committed to its output: as many
            # as a kernel wrong on one call in `one_in` needs to be caught with `detect` certainty.
            rng = secrets.SystemRandom()
            wanted, miss = checks_needed(len(timed_calls), int(spec.get("one_in", 5)), float(spec.get("detect", 0.99)))
            wanted = max(wanted, min(int(spec.get("checks", 3)), len(timed_calls)))
            checked = sorted(rng.sample(timed_calls, wanted), key=lambda c: c["id"])
            result["detection"] = {
                "checked": wanted,
                "timed": len(timed_calls),
                "one_in": int(spec.get("one_in", 5)),
                "probability": round(1.0 - miss, 4),
            }
            if "burst_detection" in window:
                result["detection"]["bursts"] = window.pop("burst_detection")
            checked = sorted(checked + burst_checked, key=lambda c: c["id"])
            result["phases"]["timing"] = round(time.perf_counter() - mark, 4)
        result["checked_calls"] = checked
        mark = time.perf_counter()
        ids = [c["id"] for c in result["verify_calls"] + checked]
        revealed = cand.ask({"op": "reveal", "ids": ids})
        if not revealed.get("ok"):
            result["claims"] = _finish(cand)
            result["stage"] = "run"
            return result
        result["commits"] = {
            str(i): {"fingerprint": commits[i][0], "evidence": commits[i][1]} for i in ids if i in commits
        }
        result["phases"]["timed_saves"] = round(time.perf_counter() - mark, 4)
        result["claims"] = _finish(cand, bandwidth=bool(timed))
        if base is not None:
            result["baselines_info"] = base.ask({"op": "finish"}).get("info", {})
        result["stage"] = "done"
        return result
    except channel.ChannelClosed as exc:
        result["stage"] = result.get("stage") or "run"
        result["channel_error"] = str(exc)
        result["timed_out"] = exc.timed_out
        return result
    finally:
        for peer in peers:
            result.setdefault("exits", {})[peer.name] = peer.end()
            if isinstance(peer, LentService) and peer.broken:
                result["service_broken"] = True
        kill_descendants()


def _wait_for(path: str, timeout: float) -> wire.BuildDone:
    """The harness's word that the build is done (and where the extension is)."""
    import json

    deadline = time.monotonic() + timeout
    delay = 0.001
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                done: wire.BuildDone = json.load(f)
                return done
        except (OSError, ValueError):
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
    return {"compiled": False}


def _finish(cand: Peer, bandwidth: bool = False) -> wire.Claims:
    try:
        sent = cand.ask({"op": "finish", "bandwidth": bandwidth}).get("claims")
    except channel.ChannelClosed:
        return {}
    claims: wire.Claims = sent if sent else {}
    return claims


def _times(values: Any) -> list[float] | None:
    """A reply's call times (µs), or None unless it is a list of finite numbers, none below 0."""
    if values is None:
        return []
    if not isinstance(values, list):
        return None
    out = []
    for x in values:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0.0:
            return None
        out.append(float(x))
    return out


def checks_needed(n: int, one_in: int, detect: float) -> tuple[int, float]:
    """(m, p): the fewest of `n` timed calls to check, drawn without replacement after the calls,
    so that a kernel wrong on one call in `one_in` (ceil(n / one_in) of them) is caught with
    probability at least `detect`, and the probability p that it is missed:
    C(n - bad, m) / C(n, m), the hypergeometric chance that no wrong call is drawn."""
    if n <= 0:
        return 0, 1.0
    bad = max(1, math.ceil(n / max(1, one_in)))
    for m in range(1, n + 1):
        miss = math.comb(n - bad, m) / math.comb(n, m)
        if miss <= 1.0 - detect:
            return m, miss
    return n, 0.0


def _time_side_by_side(
    spec: wire.EvaluateRequest, cand: Peer, base: Peer, commits: wire.Commits
) -> wire.TimingWindow | wire.WindowError:
    pinning = Pinning()
    try:
        return _timed_window(spec, cand, base, commits, pinning)
    finally:
        pinning.restore()


def _timed_window(
    spec: wire.EvaluateRequest, cand: Peer, base: Peer, commits: wire.Commits, pinning: Pinning
) -> wire.TimingWindow | wire.WindowError:
    t = spec["timing"]
    trials, warmup, block = int(t["trials"]), int(t["warmup"]), max(1, int(t["block"]))
    timed_sets = [int(k) for k in spec["timed_sets"]]
    waited = time.perf_counter()
    try:
        ready = base.ready() if isinstance(base, LentService) else base.chan.recv(cand.timeout)
    except channel.ChannelClosed as exc:
        return {"error": f"the baselines could not be prepared: {exc}", "baselines_failed": True}
    if not ready.get("ok"):
        return {"error": "the baselines could not be prepared", "baselines_failed": True}
    # On the CPU with one thread a side, both sides' processes run on one and the same core for
    # the window (once the baselines are ready, so nothing they start to prepare stays pinned):
    # every side's calls then meet the same core and caches, whichever core the scheduler would
    # have handed each process.
    # On the CPU with one thread the candidate's process is also timed by its CPU-time clock: a
    # block's work there is not inflated by other programs taking its core (harness/clock_stats.py).
    one_thread = spec["device"] == "cpu" and int(spec.get("threads") or 0) == 1
    pinned_cpu = None
    if one_thread:
        allowed = os.sched_getaffinity(0)
        core = max(allowed)
        pinned_cpu = core if pinning.pin([cand.pid, base.pid], {core}) else None
        # The harness's own processes (this controller, the zygote, and the program that asked
        # for the profile: a terminal app redrawing as it waits) keep to the other cores while
        # the window is timed, so their work never lands between one side's blocks and not the
        # other's. Put back after the window, and by the harness itself after every job.
        if pinned_cpu is not None and len(allowed) > 1:
            pinning.pin(callers(), allowed - {core})
    # Eager, every compiled baseline the baselines' process could make, then the candidate.
    sides = ["eager", *[s for s in BASELINE_SIDES if s in ready.get("sides", [])], "candidate"]
    # The baselines' process makes null blocks too: the same harness work around a stand-in,
    # where no candidate code ever ran (harness/clock_stats.py believes the candidate's up to theirs).
    if "null" in ready.get("sides", []):
        sides.append("base_null")
    waited = time.perf_counter() - waited
    rng = secrets.SystemRandom()

    def new_calls(first_id: int, n: int) -> list[wire.Call]:
        return [
            {"id": first_id + j, "model": 0, "set": rng.choice(timed_sets), "seed": secrets.randbits(62)}
            for j in range(n)
        ]

    cpu_clock = process_cpu_clock(cand.pid) if one_thread else None
    # The baselines' process's own clock, for its null blocks: the trusted measure of the same
    # work on the same clock as the candidate's null blocks.
    base_clock = process_cpu_clock(base.pid) if one_thread else None
    cpu_spent: dict[str, float] = {}

    def timed(clock: int | None, peer: Peer, request: dict[str, Any]) -> tuple[dict[str, Any], float]:
        before = cpu_us(clock)
        reply, block_us = make_calls(peer, request)
        after = cpu_us(clock)
        if before is not None and after is not None:
            cpu_spent["last"] = after - before
        else:
            cpu_spent.pop("last", None)
        return reply, block_us

    disturbed: list[float] = []  # lead-in ratios of the trusted blocks made again

    def run(side: str, calls: list[wire.Call]) -> tuple[dict[str, Any], float]:
        if side in ("candidate", "null"):
            return timed(cpu_clock, cand, {"op": "calls", "calls": calls, "null": side == "null"})
        stopped = cand.stop(spare=(base.pid,))
        try:
            request = {"op": "calls", "side": "null" if side == "base_null" else side, "calls": calls}
            # A trusted block whose lead-ins or flushes took longer than calibrated shared the
            # device with something (work the candidate's process left queued, a kernel of its
            # still running while it is stopped) or ran at a lowered clock: made again, the
            # candidate still stopped, once what was left has had time to drain.
            for attempt in range(TRUSTED_RETRIES + 1):
                reply, block_us = timed(base_clock, base, request) if side == "base_null" else make_calls(base, request)
                ratio = reply.get("device_ratio") if reply.get("ok") else None
                if not isinstance(ratio, (int, float)) or ratio <= DEVICE_SLOW:
                    return reply, block_us
                disturbed.append(round(float(ratio), 3))
                if attempt < TRUSTED_RETRIES:
                    time.sleep(RETRY_PAUSE_S * (attempt + 1))
            return {
                "ok": False,
                "device_contention": True,
                "error": f"the device ran {ratio:.2f} times slower than calibrated before each {side} call "
                f"(the lead-in and the flush), in {TRUSTED_RETRIES + 1} tries while the candidate's "
                "process was stopped: work of its process still running on the device, or another "
                "program using this GPU (or its clocks lowered)",
            }, block_us
        finally:
            cand.cont(stopped)

    # Memory for every output the window keeps, held by each side's allocator beforehand.
    size = int(cand.ask({"op": "reserve", "bytes": 0}).get("output_bytes") or 0)
    need = size * (trials + 1) + (64 << 20)
    cand.ask({"op": "reserve", "bytes": need})
    # The candidate's process also makes null blocks (the same calls around a stand-in): its own
    # overhead per call, timed here, against which its claims are bounded.
    sides.append("null")
    # Warm-up, every side on the same calls; the candidate's outputs are dropped at once.
    warm = new_calls(WARM_BASE, warmup)
    for side in sides:
        if warmup:
            reply, _ = run(side, warm)
            if reply.get("device_contention"):
                return {"error": reply["error"], "device_contention": True, "trusted_retries": disturbed}
            if not reply.get("ok"):
                return {
                    "error": f"{side} failed during warm-up: {reply.get('error', '')}"[:600],
                    "baselines_failed": side not in ("candidate", "null"),
                }
    if warmup:
        cand.ask({"op": "drop", "ids": [c["id"] for c in warm]})

    strays = stray_processes(cand.pid, base.pid)
    if strays:
        return strays_error(strays, "when timing began")
    load_before = idle_load([cand.pid, base.pid])
    meter = LoadMeter([cand.pid, base.pid])
    meter.start()
    blocks: wire.SideBlocks = {s: [] for s in sides}
    all_calls: list[wire.Call] = []
    rounds = (trials + block - 1) // block
    for r in range(rounds):
        calls = new_calls(TIMED_BASE + r * block, min(block, trials - r * block))
        all_calls.extend(calls)
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for side in order:
            reply, block_us = run(side, calls)
            if reply.get("device_contention"):
                return {"error": reply["error"], "device_contention": True, "trusted_retries": disturbed}
            if not reply.get("ok"):
                return {
                    "error": f"{side} failed while timed: {reply.get('error', '')}"[:600],
                    "baselines_failed": side not in ("candidate", "null"),
                }
            # A time is a finite number of microseconds, not below zero: NaN compares false with
            # every bound and a claim of 0 or less makes any ratio infinite.
            events, walls = _times(reply.get("events_us")), _times(reply.get("walls_us"))
            if events is None or walls is None:
                return {
                    "error": f"{side} reported call times that are not finite, non-negative numbers",
                    "forged_times": side in ("candidate", "null"),
                }
            events, walls = events[: len(calls)], walls[: len(calls)]
            if len(events) != len(calls):
                return {"error": f"{side} answered for {len(events)} of {len(calls)} calls"}
            blocks[side].append(
                {"round": r, "events_us": events, "walls_us": walls, "block_us": block_us, "n": len(calls)}
            )
            if side not in ("candidate", "null") and isinstance(reply.get("device_ratio"), (int, float)):
                blocks[side][-1]["device_ratio"] = round(float(reply["device_ratio"]), 4)
            if side in ("candidate", "null", "base_null") and "last" in cpu_spent:
                blocks[side][-1]["cpu_us"] = cpu_spent.pop("last")
            if side == "candidate":
                for c, fp, ev in zip(calls, reply.get("fingerprints", []), reply.get("evidence", [])):
                    commits[c["id"]] = (fp, ev)
    claims = [e for b in blocks["candidate"] for e in b["events_us"]]
    bursts = run_bursts(
        spec, cand, base, statistics.median(claims) if claims else math.inf, commits, rng, (cpu_clock, base_clock)
    )
    if "error" in bursts:
        return bursts
    strays = stray_processes(cand.pid, base.pid)
    if strays:
        return strays_error(strays, "while it was timed")
    found: wire.TimingWindow = {
        "blocks": blocks,
        "calls": all_calls,
        "load_before": round(load_before, 3),
        "load_during": round(meter.foreign_cores(), 3),
        "trials": len(all_calls),
        "warmup": warmup,
        "block": block,
        "baselines_wait_s": round(waited, 4),
        "pinned_cpu": pinned_cpu,
        "trusted_retries": disturbed,
        "baselines_ready": {
            "prepare_s": ready.get("prepare_s"),
            "rounds": ready.get("rounds"),
            "reused": ready.get("reused"),
        },
    }
    if "bursts" in bursts:
        found["bursts"] = bursts["bursts"]
    if "burst_calls" in bursts:
        found["burst_calls"] = bursts["burst_calls"]
    if "burst_detection" in bursts:
        found["burst_detection"] = bursts["burst_detection"]
    return found
