"""Locked: how every call draws each input leaf anew, and how the rules are found.

A call's inputs are a fresh copy of one input set, every tensor leaf given this call's values
from the call's seed (tools/timing.py `call_inputs`). The seed reaches a process only when its
call is asked for, so no input value can be known before the call, no two calls see the same
values, and a result cached by address, by content or by a few sampled values is wrong wherever
it is checked (docs/security.md, threats 26, 30, 31, 39, 40).

What a leaf may become is found on the reference itself (`find_plan`, in the inputs job): a rule
a leaf's kind offers is kept only where the reference, run on its draws, neither raises nor gives
non-finite values it did not give on the set. From the freshest rule to the least fresh:

- floats: every element multiplied by a factor in [1 - SPREAD, 1 + SPREAD] with a random sign;
  where the set holds special values (zeros, infinities: a mask), those are placed anew too, each
  element taking one with the set's share of it, so no zero pattern survives from call to call;
  then the same without the new pattern, then without signs;
- complex: a factor of the same size and a random phase;
- integers: a uniform draw in the set's range; sorted draws with the first kept (offsets); the
  same sum along the last dimension with every value in the range (lengths that add up to a
  size); a permutation along the last dimension; kept as they are only where nothing else runs;
- booleans: a draw with the set's share of True; a permutation along the last dimension.

Standard library and torch only: every process applies the same rules to the same bits, so the
judge's copy of a call's inputs is the candidate's.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import leaves
import torch
import wire

SPREAD = 0.5

# On the CPU one draw per element costs more than many calls it would time (about 5 ns each on
# one thread: 4 ms for a 3 MB input). A large tensor there is multiplied instead by three fresh
# random vectors of pairwise coprime lengths, each repeated along its flattened elements: every
# element's factor is the product of three draws, and no two elements closer than the lengths'
# product (7e10) share all three. Each vector spans the cube root of the range, so the factors
# still lie in [1 - SPREAD, 1 + SPREAD].
CPU_PERIODS = (4093, 4099, 4111)
CPU_DIRECT = 4 * max(CPU_PERIODS)
# Signs on the CPU the same way: a fresh vector of random signs, of a length coprime to the others.
CPU_SIGN_PERIOD = 4127

# How many draws of a rule the reference must take before the rule is kept, and how long the
# search for a plan may take before the remaining leaves keep their safest rule.
TRIES = 3
SEARCH_SECONDS = 20.0
# A value is a mask's (its zeros or infinities placed anew each call) only where it holds at
# least this share of a leaf: random data with a stray exact zero is plain data.
SPECIAL_SHARE_LEAST = 0.01
TRIAL_SEED = 20261204


def redraw(args: Any, seed: int, plan: list[wire.DrawRule] | None = None) -> Any:
    """Give every tensor leaf of `args` this call's values, in place, from `seed`. Without a plan,
    floating tensors are multiplied by factors in [1 - SPREAD, 1 + SPREAD]."""
    gens: dict[Any, torch.Generator] = {}

    def gen_for(t: torch.Tensor) -> torch.Generator:
        if t.device not in gens:
            gens[t.device] = torch.Generator(device=t.device)
            gens[t.device].manual_seed(int(seed))
        return gens[t.device]

    for i, t in enumerate(leaves.tensors(args)):
        if not t.numel():
            continue
        rule: wire.DrawRule | None = plan[i] if plan is not None and i < len(plan) else None
        kind = rule["kind"] if rule else ("float" if t.is_floating_point() else "keep")
        _DRAW.get(kind, _keep)(t, gen_for(t), rule or {"kind": kind})
    return args


def _keep(t: torch.Tensor, gen: torch.Generator, rule: wire.DrawRule) -> None:
    return None


def _factors(t: torch.Tensor, gen: torch.Generator, signs: bool) -> torch.Tensor:
    factor = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32)
    factor.mul_(2 * SPREAD).add_(1 - SPREAD)
    if signs:
        flip = torch.rand(t.shape, generator=gen, device=t.device) < 0.5
        factor.mul_(1.0 - 2.0 * flip.to(factor.dtype))
    return factor


def _float(t: torch.Tensor, gen: torch.Generator, rule: wire.DrawRule) -> None:
    if not t.is_floating_point():
        return
    signs = bool(rule.get("signs"))
    special: list[list[float]] = rule.get("special") or []
    if special:
        _float_pattern(t, gen, signs, special)
        return
    if t.device.type == "cpu" and t.numel() > CPU_DIRECT:
        _perturb_periodic(t, gen, signs)
        return
    t.mul_(_factors(t, gen, signs).to(t.dtype))


def _float_pattern(t: torch.Tensor, gen: torch.Generator, signs: bool, special: list[list[float]]) -> None:
    """A new pattern of the set's special values (each with its share), every other element one
    of the set's regular values picked at random and rescaled: a mask whose zeros move."""
    flat = t.reshape(-1)
    is_special = torch.zeros(flat.shape, dtype=torch.bool, device=t.device)
    for value, _ in special:
        is_special |= flat == value
    regular = flat[~is_special]
    if not regular.numel():
        return
    picks = torch.randint(0, regular.numel(), flat.shape, generator=gen, device=t.device)
    values = regular[picks] * _factors(flat, gen, signs).to(t.dtype)
    roll = torch.rand(flat.shape, generator=gen, device=t.device, dtype=torch.float64)
    edge = 0.0
    for value, share in special:
        chosen = (roll >= edge) & (roll < edge + share)
        values = torch.where(chosen, torch.full_like(values, value), values)
        edge += share
    t.copy_(values.reshape(t.shape))


def _complex(t: torch.Tensor, gen: torch.Generator, rule: wire.DrawRule) -> None:
    if not t.is_complex():
        return
    size = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32)
    size.mul_(2 * SPREAD).add_(1 - SPREAD)
    phase = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32).mul_(2 * math.pi)
    t.mul_(torch.polar(size, phase).to(t.dtype))


def _integer(t: torch.Tensor) -> bool:
    return not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool


def _int(t: torch.Tensor, gen: torch.Generator, rule: wire.DrawRule) -> None:
    if _integer(t):
        t.copy_(
            torch.randint(int(rule["lo"]), int(rule["hi"]) + 1, t.shape, generator=gen, device=t.device, dtype=t.dtype)
        )


def _int_sorted(t: torch.Tensor, gen: torch.Generator, rule: wire.DrawRule) -> None:
    """Sorted draws along the last dimension, the first of each row kept: offsets that start
    where the set's start and never decrease."""
    if not _integer(t):
        return
    drawn = torch.randint(int(rule["lo"]), int(rule["hi"]) + 1, t.shape, generator=gen, device=t.device, dtype=t.dtype)
    drawn = torch.sort(drawn, dim=-1).values
    first = t.narrow(-1, 0, 1).clone()
    drawn = torch.maximum(drawn, first)
    drawn.narrow(-1, 0, 1).copy_(first)
    t.copy_(drawn)


def _int_sum(t: torch.Tensor, gen: torch.Generator, rule: wire.DrawRule) -> None:
    """Amounts moved between random pairs along the last dimension, every value kept in the set's
    range: the same sum per row (lengths that must add up to a size), new values."""
    if not _integer(t) or t.shape[-1] < 2:
        return
    lo, hi = int(rule["lo"]), int(rule["hi"])
    n = t.shape[-1]
    rows = t.reshape(-1, n).to(torch.int64)
    for _ in range(2):
        order = torch.randperm(n, generator=gen, device=t.device)
        a, b = order[0 : n - n % 2 : 2], order[1 : n - n % 2 : 2]
        va, vb = rows[:, a], rows[:, b]
        low = torch.maximum(lo - va, vb - hi)
        high = torch.minimum(hi - va, vb - lo)
        span = (high - low + 1).to(torch.float64)
        step = low + torch.floor(torch.rand(va.shape, generator=gen, device=t.device, dtype=torch.float64) * span).to(
            torch.int64
        )
        rows[:, a], rows[:, b] = va + step, vb - step
    t.copy_(rows.reshape(t.shape).to(t.dtype))


def _permute_last(t: torch.Tensor, gen: torch.Generator, rule: wire.DrawRule) -> None:
    """The set's own values in a new order along the last dimension (every row the same order)."""
    if t.dim() == 0 or t.shape[-1] < 2:
        return
    order = torch.randperm(t.shape[-1], generator=gen, device=t.device)
    t.copy_(t.index_select(-1, order))


def _bool(t: torch.Tensor, gen: torch.Generator, rule: wire.DrawRule) -> None:
    if t.dtype == torch.bool:
        t.copy_(torch.rand(t.shape, generator=gen, device=t.device) < float(rule["p"]))


_DRAW: dict[str, Callable[[torch.Tensor, torch.Generator, wire.DrawRule], None]] = {
    "float": _float,
    "complex": _complex,
    "int": _int,
    "int_sorted": _int_sorted,
    "int_sum": _int_sum,
    "int_perm": _permute_last,
    "bool": _bool,
    "bool_perm": _permute_last,
    "keep": _keep,
}


def _perturb_periodic(t: torch.Tensor, gen: torch.Generator, signs: bool = False) -> None:
    # The factors are made in row-major order of t's elements whatever its layout, then applied
    # in one multiply, so every copy of an input (the judge's, the candidate's) gets the same bits.
    lo, hi = (1 - SPREAD) ** (1 / 3), (1 + SPREAD) ** (1 / 3)
    draws = torch.rand(sum(CPU_PERIODS), generator=gen, dtype=torch.float32)
    draws.mul_(hi - lo).add_(lo)
    pieces = list(CPU_PERIODS)
    if signs:
        flips = torch.rand(CPU_SIGN_PERIOD, generator=gen) < 0.5
        draws = torch.cat([draws, 1.0 - 2.0 * flips.to(torch.float32)])
        pieces.append(CPU_SIGN_PERIOD)
    n = t.numel()
    factor = _scratch(n, torch.float32).fill_(1.0)
    start = 0
    for period in pieces:
        piece = draws[start : start + period]
        start += period
        whole = n - n % period
        factor[:whole].view(-1, period).mul_(piece)
        if whole < n:
            factor[whole:].mul_(piece[: n - whole])
    if t.dtype != torch.float32:
        factor = _scratch(n, t.dtype).copy_(factor)
    t.mul_(factor.view(t.shape))


# The buffers the periodic perturbation builds its factors in, kept from call to call. Made
# anew for every call, a buffer the size of the input came from fresh pages whenever the heap
# around the freed one had been taken by outputs kept meanwhile (the candidate keeps every timed
# call's output; the baselines free theirs): its page faults, a millisecond for 3 MB, counted as
# harness work around the candidate's calls only, more so late in the window, and the clock's
# bound charged them to the kernel.
_SCRATCH: dict[tuple[int, torch.dtype], torch.Tensor] = {}
_SCRATCH_MOST = 8


def _scratch(n: int, dtype: torch.dtype) -> torch.Tensor:
    key = (n, dtype)
    found = _SCRATCH.get(key)
    if found is None:
        if len(_SCRATCH) >= _SCRATCH_MOST:
            _SCRATCH.clear()
        found = _SCRATCH[key] = torch.empty(n, dtype=dtype)
    return found


# -- finding the plan ------------------------------------------------------------------------------


def _special_values(t: torch.Tensor) -> list[list[float]]:
    """The set's zeros and infinities with their shares, where it has any and other values too
    (a mask of zeros and -inf has -inf as its special value, zeros as its regular ones)."""
    flat = t.reshape(-1)
    n = flat.numel()
    found = []
    for value, hits in (
        (0.0, int((flat == 0).sum())),
        (math.inf, int((flat == math.inf).sum())),
        (-math.inf, int((flat == -math.inf).sum())),
    ):
        if hits and hits / n >= SPECIAL_SHARE_LEAST:
            found.append([value, hits / n])
    if found and sum(round(share * n) for _, share in found) == n:
        found = found[1:]  # every element is special: the first kind is the regular one
    return found


def _is_sorted(t: torch.Tensor) -> bool:
    return t.shape[-1] < 2 or bool((t.diff(dim=-1) >= 0).all())


def options(t: torch.Tensor) -> list[wire.DrawRule]:
    """The rules a leaf may take, freshest first; the last is always safe (kept, or rescaled)."""
    if not t.numel():
        return [{"kind": "keep"}]
    if t.is_complex():
        return [{"kind": "complex"}, {"kind": "keep"}]
    if t.is_floating_point():
        special = _special_values(t)
        rules: list[wire.DrawRule] = []
        if special:
            rules += [{"kind": "float", "signs": True, "special": special}, {"kind": "float", "special": special}]
        return rules + [{"kind": "float", "signs": True}, {"kind": "float", "signs": False}]
    if t.dtype == torch.bool:
        return [{"kind": "bool", "p": float(t.float().mean())}, {"kind": "bool_perm"}, {"kind": "keep"}]
    lo, hi = int(t.min()), int(t.max())
    rules = [{"kind": "int", "lo": lo, "hi": hi}]
    if t.dim() and _is_sorted(t):
        rules.append({"kind": "int_sorted", "lo": lo, "hi": hi})
    if t.dim() and t.shape[-1] >= 2 and lo < hi:
        rules.append({"kind": "int_sum", "lo": lo, "hi": hi})
        rules.append({"kind": "int_perm"})
    return rules + [{"kind": "keep"}]


def non_finite(out: Any) -> int:
    return sum(int((~torch.isfinite(t)).sum()) for t in leaves.tensors(out) if t.is_floating_point() or t.is_complex())


def find_plan(
    run: Callable[[Any], Any],
    inputs: list[Any],
    clone: Callable[[Any], Any],
    budget_s: float = SEARCH_SECONDS,
) -> list[wire.DrawRule] | None:
    """The freshest rule of every leaf that the reference takes (`run` calls it on inputs; `clone`
    copies a set). Every leaf starts at its freshest rule; where the reference refuses the whole
    plan, each leaf in turn steps down to the first rule it takes with the others held at their
    safest. None where even every leaf at its safest fails (then the plain rescaling is used)."""
    found = [options(t) for t in leaves.tensors(inputs)]
    if not found:
        return None
    try:
        bad_before = non_finite(run(clone(inputs)))
    except Exception:
        return None

    def takes(plan: list[wire.DrawRule]) -> bool:
        for k in range(TRIES):
            try:
                out = run(redraw(clone(inputs), TRIAL_SEED + k, plan))
            except Exception:
                return False
            if non_finite(out) > bad_before:
                return False
        return True

    freshest = [rules[0] for rules in found]
    if takes(freshest):
        return freshest
    plan = [rules[-1] for rules in found]
    if not takes(plan):
        return None
    deadline = time.monotonic() + budget_s
    for i, rules in enumerate(found):
        for rule in rules[:-1]:
            if time.monotonic() > deadline:
                return plan
            trial = plan[:i] + [rule] + plan[i + 1 :]
            if takes(trial):
                plan = trial
                break
    return plan


def kept_leaves(plan: list[wire.DrawRule] | None, inputs: list[Any]) -> list[str]:
    """The paths of leaves a plan keeps as they are, though they hold values (structure no rule
    could draw anew): the timed calls then want more sets of their own."""
    if plan is None:
        return [
            p
            for p, t in zip(leaves.tensor_paths(inputs), leaves.tensors(inputs))
            if t.numel() and not t.is_floating_point()
        ]
    return [
        path
        for path, t, rule in zip(leaves.tensor_paths(inputs), leaves.tensors(inputs), plan)
        if t.numel() and rule["kind"] == "keep"
    ]
