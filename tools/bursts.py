"""Locked: the bursts that follow the window where its calls are too short to resolve: the
candidate's calls back to back, and the null bursts of both processes, each timed by the
controller from request to reply (tools/timing.py makes the calls; harness/clock_stats.py reads
them).
"""

from __future__ import annotations

import math
import random
import secrets

import wire
from cpu_clock import cpu_us
from peers import Peer, make_calls

# Bursts (tools/timing.py): where the candidate's median claim is below BURST_CLAIM_MOST_US, the
# window is followed by `bursts` rounds, each a burst of the candidate's calls, one of its
# process's null calls and one of the baselines' process's null calls, in turn. A burst has as
# many calls as take about BURST_TARGET_US by the claim (with BURST_HOST_US of host work a
# call), within [BURST_LEAST, BURST_MOST] and as many as the spec's `burst_bytes` of inputs and
# outputs hold (BURST_BYTES where it says none); the outputs kept to be checked take at most its
# `burst_check_bytes` in all.
BURST_CLAIM_MOST_US = 2000.0
BURST_TARGET_US = 20000.0
BURST_HOST_US = 20.0
BURST_LEAST, BURST_MOST = 4, 256
BURST_BYTES = 1 << 30
BURST_BASE = 200000  # burst call ids count up from here


def burst_size(claim_us: float, call_bytes: int, budget: int = BURST_BYTES) -> int:
    """Calls in a burst for a kernel that claims `claim_us` a call and whose inputs and outputs
    take `call_bytes`: 0 where none is needed (a claim long enough for the window's calls) or
    fewer than BURST_LEAST fit the budget."""
    if not math.isfinite(claim_us) or claim_us >= BURST_CLAIM_MOST_US:
        return 0
    wanted = math.ceil(BURST_TARGET_US / (max(claim_us, 0.0) + BURST_HOST_US))
    fits = budget // max(1, call_bytes)
    k = min(max(wanted, BURST_LEAST), BURST_MOST, fits)
    return k if k >= BURST_LEAST else 0


def burst_checks(k: int, rounds: int, one_in: int, detect: float, most: int | None = None) -> tuple[list[int], float]:
    """(ms, p): how many of each burst's `k` calls to check (one count a burst), drawn after the
    burst, so that a kernel wrong on one call in `one_in` of every burst is caught with
    probability at least `detect` over `rounds` bursts, yet no more than `most` a burst (at least
    one), and the probability p that such a kernel is missed by those checks. The counts differ by
    at most one: the fewest checks in all that reach `detect` (each checked output is a full copy
    handed over, which is what a profile of a large output spends its checking on)."""
    if k <= 0 or rounds <= 0:
        return [], 1.0
    bad = max(1, math.ceil(k / max(1, one_in)))
    cap = k if most is None else max(1, min(k, most))
    target = 1.0 - detect

    def missed(m: int) -> float:
        return math.comb(k - bad, m) / math.comb(k, m)

    def split(m: int, fewer: int) -> float:  # `fewer` bursts check m - 1 calls, the rest m
        return missed(m - 1) ** fewer * missed(m) ** (rounds - fewer)

    for m in range(1, cap + 1):
        if missed(m) ** rounds <= target:
            # m in every burst suffices; as many bursts as can stay at m - 1 (never none) do.
            fewer = max((f for f in range(rounds) if m > 1 and split(m, f) <= target), default=0)
            return [m - 1] * fewer + [m] * (rounds - fewer), split(m, fewer)
    return [cap] * rounds, missed(cap) ** rounds


def _record(row: wire.Burst, side: str, us: float, cpu_us: float | None) -> None:
    """One side's burst in its round's row: its time by the controller's clock, and on its
    process's CPU-time clock where that was read."""
    if side == "candidate":
        row["candidate_us"] = us
        if cpu_us is not None:
            row["candidate_cpu_us"] = cpu_us
    elif side == "null":
        row["null_us"] = us
        if cpu_us is not None:
            row["null_cpu_us"] = cpu_us
    else:
        row["base_null_us"] = us
        if cpu_us is not None:
            row["base_null_cpu_us"] = cpu_us


def run_bursts(
    spec: wire.EvaluateRequest,
    cand: Peer,
    base: Peer,
    claim_us: float,
    commits: wire.Commits,
    rng: random.Random,
    clocks: tuple[int | None, int | None] = (None, None),
) -> wire.WindowBursts | wire.WindowError:
    """The window's bursts, as the window's `bursts`, `burst_calls` and `burst_detection` (none
    where the kernel needs none), or a WindowError: each round's candidate burst, its process's null burst and the
    baselines' null burst, each timed here from request to reply (and, where `clocks` holds the
    two processes' CPU-time clocks, on the burst's process's own clock too); the candidate's outputs
    committed to, a few of each burst kept to be checked (chosen after the commit) and the rest
    dropped."""
    import serving

    t = spec["timing"]
    rounds = int(t.get("bursts") or 0)
    timed_sets = [int(k) for k in spec["timed_sets"]]
    if rounds <= 0 or not timed_sets:
        return {}
    sizes = base.ask({"op": "burst_sizes", "sets": timed_sets})
    if not sizes.get("ok"):
        return {}
    out_bytes = max(1, int(sizes.get("output_bytes") or 0))
    k = burst_size(claim_us, int(sizes.get("input_bytes") or 0) + out_bytes, int(t.get("burst_bytes") or BURST_BYTES))
    if not k:
        return {}
    most = int(t.get("burst_check_bytes") or BURST_BYTES) // (out_bytes * rounds)
    per_burst, miss = burst_checks(k, rounds, int(spec.get("one_in", 5)), float(spec.get("detect", 0.99)), most)
    rng.shuffle(per_burst)  # which bursts are checked more is not known in advance either
    found: list[wire.Burst] = []
    checked: list[wire.Call] = []
    ops = 0  # the ops the candidate's stand-in dispatches, which the baselines' stand-in matches
    sides = ["candidate", "null", "base_null"]
    for r in range(rounds):
        row: wire.Burst = {"round": r, "n": k, "candidate_us": 0.0, "null_us": 0.0, "base_null_us": 0.0}
        for side in sides[r % 3 :] + sides[: r % 3]:
            first = BURST_BASE + (r * len(sides) + sides.index(side)) * k
            calls: list[wire.Call] = [
                {"id": first + j, "model": 0, "set": rng.choice(timed_sets), "seed": secrets.randbits(62)}
                for j in range(k)
            ]
            peer = base if side == "base_null" else cand
            stopped = cand.stop(spare=(base.pid,)) if side == "base_null" else []
            try:
                made = peer.ask({"op": "burst_prepare", "calls": calls, "null": side != "candidate", "ops": ops})
                if side == "candidate" and isinstance(made.get("ops"), int):
                    ops = max(0, min(int(made["ops"]), serving.STAND_IN_OPS_MOST))
                if not made.get("ok"):
                    return {
                        "error": f"{side} burst could not be prepared: {made.get('error', '')}"[:600],
                        "baselines_failed": side == "base_null",
                    }
                clock = clocks[1] if side == "base_null" else clocks[0]
                before = cpu_us(clock)
                reply, burst_us = make_calls(peer, {"op": "burst_run"})
                after = cpu_us(clock)
            finally:
                cand.cont(stopped)
            if not reply.get("ok"):
                return {
                    "error": f"{side} failed in a burst: {reply.get('error', '')}"[:600],
                    "baselines_failed": side == "base_null",
                }
            _record(
                row,
                side,
                round(burst_us, 2),
                round(after - before, 2) if before is not None and after is not None else None,
            )
            if side != "candidate":
                continue
            committed = cand.ask({"op": "burst_commit"})
            if not committed.get("ok"):
                return {"error": "the candidate's burst outputs could not be committed"}
            fps, proofs = committed.get("fingerprints") or [], committed.get("evidence") or []
            if len(fps) != k or len(proofs) != k:
                return {"error": f"the candidate committed to {len(fps)} of a burst's {k} outputs"}
            for c, fp, ev in zip(calls, fps, proofs):
                commits[c["id"]] = (fp, ev)
            chosen = rng.sample(calls, per_burst[r])
            checked.extend(chosen)
            keep = {c["id"] for c in chosen}
            cand.ask({"op": "drop", "ids": [c["id"] for c in calls if c["id"] not in keep]})
        found.append(row)
    detection: wire.Detection = {
        "checked": len(checked),
        "timed": k * rounds,
        "one_in": int(spec.get("one_in", 5)),
        "probability": round(1.0 - miss, 4),
    }
    return {"bursts": found, "burst_calls": sorted(checked, key=lambda c: c["id"]), "burst_detection": detection}
