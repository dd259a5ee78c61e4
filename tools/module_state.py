"""Locked: a model's state around its calls, and the weights the harness changes between calls.

A user relies on more than one output: on the parameters and buffers a forward leaves behind (a
BatchNorm's running statistics in training mode, weights left where they were), and on a module
that follows its weights when they change (a new state_dict, an optimizer's step in place).
So the verification calls are made on models whose state is recorded before and after each
call, and two more calls follow weight changes the harness makes itself (docs/security.md,
threats 42 and 43):

- `load`: the state of another input set copied into the model's own tensors, in place, as
  `load_state_dict` does: same addresses, new values;
- `step`: every floating parameter multiplied and shifted in place by small factors drawn from a
  seed, as an optimizer's step changes it.

Both change each tensor's version counter, as torch's own in-place writes do, so a kernel that
keeps data made from the weights can tell when to make it again. The judge makes the same
changes to the reference's model, bit for bit, and decides; the candidate's process only
records. Standard library and torch only.
"""

from __future__ import annotations

from typing import Any

import evidence
import torch
import wire

# An optimizer step's size: every element of a parameter is multiplied by a factor in
# [1 - STEP, 1 + STEP] and moved by up to STEP_SHIFT, drawn anew from the change's seed.
STEP = 0.1
STEP_SHIFT = 0.01


def tensors(model: Any) -> dict[str, torch.Tensor]:
    """The model's parameters and buffers by their state_dict names (none for a plain function)."""
    if not isinstance(model, torch.nn.Module):
        return {}
    return {name: t.detach() for name, t in model.state_dict(keep_vars=True).items() if isinstance(t, torch.Tensor)}


def fingerprints(model: Any) -> dict[str, wire.Fingerprint]:
    """A bit-exact fingerprint of every parameter and buffer, by name."""
    return {name: evidence.fingerprint(t) for name, t in tensors(model).items()}


def load(model: Any, state: dict[str, torch.Tensor]) -> list[str]:
    """Copy `state` into the model's own tensors where names and shapes match; the names copied."""
    own = tensors(model)
    done = []
    with torch.no_grad():
        for name, value in state.items():
            target = own.get(name)
            if target is not None and target.shape == value.shape:
                target.copy_(value.to(device=target.device, dtype=target.dtype))
                done.append(name)
    return done


def step(model: Any, seed: int) -> list[str]:
    """An optimizer-like step in place on every floating parameter; the names changed. The same
    seed gives the same bits on the same device in every process."""
    if not isinstance(model, torch.nn.Module):
        return []
    params = {name for name, _ in model.named_parameters()}
    done = []
    gens: dict[Any, torch.Generator] = {}
    with torch.no_grad():
        for name, t in tensors(model).items():
            if not t.is_floating_point() or name not in params:
                continue
            if t.device not in gens:
                gens[t.device] = torch.Generator(device=t.device)
                gens[t.device].manual_seed(int(seed))
            gen = gens[t.device]
            scale = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32)
            shift = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32)
            t.mul_(scale.mul_(2 * STEP).add_(1 - STEP).to(t.dtype))
            t.add_(shift.mul_(2 * STEP_SHIFT).sub_(STEP_SHIFT).to(t.dtype))
            done.append(name)
    return done


def change(model: Any, weights: wire.WeightChange, state_of: Any) -> list[str]:
    """Make the weight change a call asks for before it runs: `load` takes the state of input set
    weights["load"] (`state_of(k)` gives it), `step` its seed."""
    if "load" in weights:
        return load(model, state_of(int(weights["load"])))
    if "step" in weights:
        return step(model, int(weights["step"]))
    return []


def _result(passed: bool, detail: str) -> wire.Check:
    return {"name": "module_state", "passed": bool(passed), "detail": detail}


def check(
    before: dict[str, wire.Fingerprint],
    after: dict[str, torch.Tensor],
    claimed: wire.StateEvidence | None,
    handed: list[Any] | None,
    compare: Any,
) -> wire.Check:
    """module_state for one call, in the judge: the reference's parameters and buffers before
    (`before`, fingerprints) and after (`after`) its call, against what the candidate's process
    committed to after its own (`claimed`) and the tensors it handed over for those it changed
    (`handed`, in `claimed["changed"]` order). `compare(ref, cand)` gives the value checks of two
    tensors (tools/output_checks.py, by the precision rule). Every tensor the reference leaves as
    it was must be bit-identical; every one it changes must be changed alike."""
    if not after and not claimed:
        return _result(True, "no parameters or buffers")
    if claimed is None:
        return _result(False, "the candidate's process recorded no parameters or buffers for this call")
    theirs, changed = claimed.get("after") or {}, list(claimed.get("changed") or [])
    missing, extra = sorted(set(after) - set(theirs)), sorted(set(theirs) - set(after))
    if missing or extra:
        return _result(
            False,
            "ModelNew's parameters and buffers differ from Model's by name"
            + (f"; missing {', '.join(missing[:4])}" if missing else "")
            + (f"; extra {', '.join(extra[:4])}" if extra else "")
            + ": a checkpoint of the original module would not load into it",
        )
    values = dict(zip(changed, handed or []))
    for name, tensor in after.items():
        mine = evidence.fingerprint(tensor)
        ref_changed = before.get(name) != mine
        if name not in changed:
            if theirs[name] == mine:
                continue
            if ref_changed:
                return _result(False, f"the reference's forward updates {name}; ModelNew's left it as it was")
            return _result(False, f"{name} is not the reference's after the call")
        if not ref_changed:
            return _result(False, f"the call changed {name} in place; the reference leaves it as it is")
        got = values.get(name)
        if got is None or evidence.fingerprint(got) != theirs[name]:
            return _result(False, f"{name}: what was handed over is not what the call left")
        for c in compare(tensor, got):
            if not c["passed"]:
                return _result(False, f"{name} after the call: {c['detail']}")
    updated = [n for n in changed]
    return _result(
        True,
        "parameters and buffers as the reference's after each call"
        + (f" (updated alike: {', '.join(updated[:4])})" if updated else ""),
    )
