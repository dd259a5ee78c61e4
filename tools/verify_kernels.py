"""Locked: the jobs that prepare and judge one evaluation, each in its own forked process.

Order (the harness drives it): `inputs` imports the pristine reference and writes the init
arguments, weights and inputs of every input set: one set per verification seed, and fresh sets
for the timed calls, drawn by get_inputs() with seeds of their own. `evaluate`
(tools/controller.py) runs the candidate and the baselines. `judge` then imports the pristine
reference, rebuilds the inputs of every call the controller revealed (the input set and the
call's seed), computes the expected outputs on the device and decides every output check there,
in a process the candidate's code never ran in. Inputs travel as torch.save files (read back with
weights_only=True), the candidate's outputs as raw tensor files (tensor_files.py), all in a
directory only the harness hands out.
"""

from __future__ import annotations

import pickle
import random
import threading
import time
from pathlib import Path
from typing import Any

import draws
import evidence
import init_objects
import integrity
import leaves
import module_state
import output_checks
import precision
import tensor_files
import timing
import torch
import wire
from input_sets import build_model, load_set
from worker_common import (
    apply_precision_flags,
    device_sync,
    fresh_clone,
    load_module,
    to_cpu,
    to_device,
    trim_exception,
)

_clock = time.perf_counter


def _phase(result: wire.JudgeResult, name: str, since: float) -> float:
    """Record how long a phase of this job took (for the stage breakdown); returns now."""
    now = _clock()
    result.setdefault("phases", {})[name] = round(now - since, 4)
    return now


def _check(name: str, passed: bool, detail: str) -> wire.Check:
    return {"name": name, "passed": bool(passed), "detail": detail}


def _seed_all(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def _describe(inputs: list[Any]) -> str:
    """The inputs in a line: shapes and dtypes of tensors, the repr of anything else; leaves
    inside containers named by their path."""
    nested = any(leaves.items(x) is not None for x in inputs)
    parts = []
    for path, leaf in leaves.walk(inputs):
        shown = (
            f"{tuple(leaf.shape)} {str(leaf.dtype).removeprefix('torch.')}"
            if isinstance(leaf, torch.Tensor)
            else repr(leaf)
        )
        parts.append(f"{path} {shown}" if nested else shown)
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------


def run_inputs_job(spec: wire.InputsRequest) -> wire.InputsResult | wire.JobError:
    evidence.session_device(spec["device"])
    """Init args, weights and inputs per seed, all produced by the pristine reference."""
    apply_precision_flags()
    try:
        ref = load_module(spec["reference"], "reference_model")
    except BaseException as exc:
        return {"error": f"the reference {spec['reference']} failed to import: {trim_exception(exc, 400)}"}
    if not isinstance(getattr(ref, "Model", None), type):
        return {"error": f"{spec['reference']} defines no class Model"}
    if not callable(getattr(ref, "get_inputs", None)):
        return {"error": f"{spec['reference']} defines no get_inputs()"}
    out_dir = Path(spec["out_dir"])
    fingerprints: list[wire.SetFingerprints] = []
    first: tuple[Any, list[Any]] | None = None
    described = ""
    total_bytes = 0
    # Sets past the first `models` carry inputs only: timed calls run on the first set's model.
    n_models = int(spec.get("models", len(spec["seeds"])))
    # The sets this job writes (several jobs may share one evaluation's sets).
    indices = [int(i) for i in spec.get("indices", range(len(spec["seeds"])))]
    for i in indices:
        seed = spec["seeds"][i]
        try:
            init: list[Any] = []
            state: dict[str, Any] = {}
            if i < n_models:
                _seed_all(seed)
                init = list(ref.get_init_inputs()) if callable(getattr(ref, "get_init_inputs", None)) else []
                _seed_all(seed)
                model = ref.Model(*init)
                state = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
            _seed_all(seed + 1)
            inputs = list(ref.get_inputs())
        except BaseException as exc:
            return {"error": f"building the reference model or its inputs failed: {trim_exception(exc, 400)}"}
        try:
            carried, pickled = init_objects.save(init, out_dir, i)
            carried_inputs, pickled_inputs = init_objects.save(to_cpu(inputs), out_dir, i, "inputs")
        except (TypeError, pickle.PicklingError, AttributeError) as exc:
            return {
                "error": f"the constructor arguments or inputs cannot be handed to the candidate: {trim_exception(exc, 300)}"
            }
        if i == 0:
            first = (model, inputs)
        payload = {"init": carried if pickled else to_cpu(init), "inputs": carried_inputs, "state": state}
        if pickled:
            payload["init_pickle"] = pickled
        if pickled_inputs:
            payload["inputs_pickle"] = pickled_inputs
        torch.save(payload, out_dir / f"inputs_{i}.pt")
        # Over the inputs as the trusted processes load them (the real objects); the candidate's
        # stand-ins have the same leaves.
        fingerprints.append(_payload_fingerprints(payload, to_cpu(inputs), "cpu"))
        if i == indices[0]:
            total_bytes = leaves.nbytes(inputs)
            described = _describe(inputs)
    # Kept by the harness, away from these files, so the judge can tell if anything rewrote them.
    found: wire.InputsResult = {
        "n": len(indices),
        "indices": indices,
        "inputs": described,
        "input_bytes": total_bytes,
        "fingerprints": fingerprints,
    }
    if first is not None:
        plan = fresh_draw_plan(*first, spec["device"])
        found["plan"] = plan
        found["kept"] = draws.kept_leaves(plan, first[1])
    return found


def fresh_draw_plan(model: Any, inputs: list[Any], device: str) -> list[wire.DrawRule] | None:
    """How every call draws each input leaf anew (tools/draws.py), found on the reference's first
    set on the device: None where even the plain rescaling makes it fail."""
    try:
        net = model.to(device) if isinstance(model, torch.nn.Module) else model
        on_device = to_device(inputs, device)
        with torch.no_grad():
            return draws.find_plan(lambda args: net(*args), on_device, fresh_clone)
    except Exception:
        return None


def _payload_fingerprints(payload: dict[str, Any], inputs: list[Any], device: str) -> wire.SetFingerprints:
    """Fingerprints of one input set (`inputs`: payload["inputs"], already on `device`) and of
    the init arguments and weights it came with."""
    return {
        "inputs": evidence.fingerprint(list(inputs)),
        "model": evidence.fingerprint(to_device([payload["init"], list(payload["state"].values())], device)),
    }


# ---------------------------------------------------------------------------------------------
# judge
# ---------------------------------------------------------------------------------------------


def _wide(obj: Any) -> Any:
    """Floating tensors as float64, complex ones as complex128 (every container kept)."""

    def wide(t: torch.Tensor) -> torch.Tensor:
        if t.is_complex():
            return t.to(torch.complex128)
        return t.to(torch.float64) if t.is_floating_point() else t

    return leaves.map_tensors(obj, wide)


def _in_float64(models64: dict[int, Any], m: int, model: Any, args: list[Any]) -> Any:
    """The reference's outputs for `args` computed in float64 (the numerical truth eager's own
    error is measured from), or None where the reference cannot run so (code that casts to a
    dtype of its own, a module that cannot be copied)."""
    if m not in models64:
        try:
            import copy

            wide = copy.deepcopy(model)
            models64[m] = wide.to(torch.float64) if isinstance(wide, torch.nn.Module) else None
        except Exception:
            models64[m] = None
    if models64[m] is None:
        return None
    try:
        with torch.no_grad():
            return models64[m](*_wide(args))
    except Exception:
        return None


class _OutputsAhead:
    """The candidate's handed-over outputs, each read while the call before it is checked: reading
    a large output off its file and onto the device is as long as the reference's forward, and
    the two overlap. One output at most is read ahead, so the judge holds one more at a time."""

    def __init__(self, cand_dir: Path, ids: list[int]) -> None:
        self.cand_dir, self.ids = cand_dir, ids
        self.pending: dict[int, tuple[threading.Thread, list[Any]]] = {}

    def _read(self, cid: int, into: list[Any]) -> None:
        path = self.cand_dir / f"call_{cid}"
        try:
            into.extend(
                (tensor_files.load_outputs(path), "")
                if tensor_files.exists(path)
                else (None, "no output was handed over")
            )
        except BaseException as exc:  # files the candidate process left malformed; nothing escapes the thread
            into[:] = [None, trim_exception(exc, 300)]

    def _start(self, cid: int) -> None:
        box: list[Any] = []
        reader = threading.Thread(target=self._read, args=(cid, box), daemon=True)
        reader.start()
        self.pending[cid] = (reader, box)

    def take(self, cid: int) -> tuple[Any, str]:
        """(outputs or None, why none)."""
        if cid not in self.pending:
            self._start(cid)
        reader, box = self.pending.pop(cid)
        reader.join()
        at = self.ids.index(cid) if cid in self.ids else -1
        if 0 <= at < len(self.ids) - 1:
            self._start(self.ids[at + 1])
        return box[0], box[1]


# How the calls after a weight change are named in a check's detail.
_WEIGHT_LABELS = {
    "load": "after new weights were copied in (load_state_dict)",
    "step": "after an optimizer-like step changed the weights in place",
}


def _handed_state(cand_dir: Path, cid: int) -> list[Any] | None:
    """The parameters and buffers the candidate's call `cid` changed, as it handed them over."""
    path = cand_dir / f"state_{cid}"
    try:
        found = tensor_files.load_outputs(path) if tensor_files.exists(path) else None
    except BaseException:  # files the candidate process left malformed: nothing handed over
        return None
    return list(found) if isinstance(found, (list, tuple)) else None


def run_judge_job(spec: wire.JudgeRequest) -> wire.JudgeResult:
    evidence.session_device(spec["device"])
    """Expected outputs from the pristine reference, compared with the candidate's on the device.

    The candidate's code never ran in this process; its outputs arrive as raw tensor files, each
    tensor back on the device the candidate returned it on, and its evidence and the fingerprint
    it committed to for each output as JSON numbers. Every revealed call, checked or timed, gets
    every check.
    """
    mode = spec.get("precision", precision.DEFAULT)
    apply_precision_flags(mode)
    device = spec["device"]
    atol, rtol = float(spec["atol"]), float(spec["rtol"])
    ref = load_module(spec["reference"], "reference_model")
    in_dir, cand_dir = Path(spec["inputs_dir"]), Path(spec["cand_dir"])
    originals = spec.get("fingerprints") or []
    commits = spec.get("commits") or {}
    checks: list[wire.Check] = []
    result: wire.JudgeResult = {"checks": checks}
    mark = _clock()

    payloads: dict[int, dict[str, Any]] = {}
    inputs_on_device: dict[int, list[Any]] = {}
    models: dict[int, Any] = {}
    models64: dict[int, Any] = {}

    def input_set(k: int) -> list[Any] | None:
        if k not in inputs_on_device:
            payload = load_set(in_dir / f"inputs_{k}.pt")
            payloads[k] = payload
            inputs_on_device[k] = to_device(payload["inputs"], device)
            found = {
                "inputs": evidence.fingerprint(list(inputs_on_device[k])),
                "model": evidence.fingerprint(to_device([payload["init"], list(payload["state"].values())], device)),
            }
            if k < len(originals) and originals[k] != found:
                return None
        return inputs_on_device[k]

    merged: dict[str, wire.Check] = {}

    def merge(label: str, found: list[wire.Check]) -> None:
        for c in found:
            first = merged.setdefault(c["name"], {"name": c["name"], "passed": True, "detail": c["detail"]})
            if not c["passed"] and first["passed"]:
                first.update({"passed": False, "detail": f"{label}: {c['detail']}"})

    outputs: dict[int, Any] = {}
    ahead = _OutputsAhead(cand_dir, [int(c["id"]) for c in spec["calls"]])
    timed_bad: list[str] = []
    timed_ids: list[int] = []
    for call in spec["calls"]:
        cid, m, k, role = int(call["id"]), int(call["model"]), int(call["set"]), call.get("role", "verify")
        base = input_set(k)
        if base is None or (m not in models and input_set(m) is None):
            checks.append(
                _check(
                    "input_files",
                    False,
                    f"set {k}: the inputs or weights on disk changed after the "
                    "reference wrote them; something outside the harness rewrote its files",
                )
            )
            return result
        if m not in models:
            models[m], _ = build_model(ref.Model, payloads[m], device, int(spec["seeds"][m]))
        state_before: dict[str, wire.Fingerprint] = {}
        if role != "timed":
            weights = call.get("weights")
            if weights:
                # The same change the candidate's model went through, made to the reference's.
                module_state.change(models[m], weights, lambda j: payloads[j]["state"] if input_set(j) else {})
                models64.pop(m, None)
            state_before = module_state.fingerprints(models[m])
        args = timing.call_inputs(base, int(call["seed"]), device, spec.get("plan"))
        before = evidence.fingerprint(list(args))
        try:
            with torch.no_grad():
                expected = models[m](*args)
            device_sync(device)
            reference_after = evidence.fingerprint(list(args))
        except Exception as exc:
            result["reference_error"] = f"call {cid}: {trim_exception(exc, 600)}"
            return result
        if "verified_precision" not in result:
            result["verified_precision"] = precision.name(mode, [str(t.dtype) for t in leaves.tensors(expected)])
        model = models[m]
        # The float64 truth from the call's own inputs: drawn again where the reference wrote them.
        call_args = (
            args if reference_after == before else timing.call_inputs(base, int(call["seed"]), device, spec.get("plan"))
        )
        exact = lambda: _in_float64(models64, m, model, call_args)  # noqa: E731 (made only where it decides)
        label = f"seed {cid}" if role != "timed" else f"timed call {cid}"
        got, unreadable = ahead.take(cid)
        committed: wire.Commit | dict[str, Any] = commits.get(str(cid)) or {}
        found: list[wire.Check] = []
        if got is None:
            found.append(_check("output_type", False, f"candidate output unreadable: {unreadable}"))
        else:
            type_check, values = output_checks.compare_values(expected, got, atol, rtol, exact, mode)
            proof = committed.get("evidence") or {}
            same = committed.get("fingerprint") == evidence.fingerprint(
                list(got) if isinstance(got, (tuple, list)) else [got]
            )
            found = [
                type_check,
                evidence.check_aliasing(proof.get("output_ranges", []), proof.get("input_ranges", [])),
                evidence.check_inputs_unchanged(before, proof.get("inputs_after"), reference_after),
                _check(
                    "committed_outputs",
                    same,
                    "the output handed over is the one the call returned"
                    if same
                    else "the output handed over is not the one whose fingerprint the call returned",
                ),
            ] + values
        if role == "timed":
            timed_ids.append(cid)
            bad = [c for c in found if not c["passed"]]
            if bad:
                timed_bad.append(f"timed call {cid}: {bad[0]['name']}: {bad[0]['detail']}")
        else:
            after = module_state.tensors(models[m])
            state = module_state.check(
                state_before,
                after,
                (committed.get("evidence") or {}).get("state"),
                _handed_state(cand_dir, cid),
                lambda r, c: output_checks.compare_values(r, c, atol, rtol, None, mode)[1],
            )
            if any(state_before.get(n) != evidence.fingerprint(t) for n, t in after.items()):
                models64.pop(m, None)  # a forward that updates state: the float64 copy is made anew
            if role == "weights":
                label = _WEIGHT_LABELS["load" if "load" in (call.get("weights") or {}) else "step"]
                bad = [c for c in found if not c["passed"]]
                found = [
                    _check(
                        "changed_weights",
                        not bad,
                        f"{bad[0]['name']}: {bad[0]['detail']}" if bad else "outputs follow weights changed in place",
                    )
                ]
            merge(label, found + [state])
            outputs[cid] = got
        del expected, args, exact
    checks.extend(merged.values())
    if originals:
        checks.insert(0, _check("input_files", True, "inputs and weights are the ones the reference wrote"))
    mark = _phase(result, "seeds", mark)

    again = [c for c in spec["calls"] if c.get("role") == "again"]
    if again:
        a, first = outputs.get(int(again[0]["id"])), outputs.get(0)
        same = a is not None and first is not None and output_checks.all_close(first, a, atol, rtol)
        checks.append(
            _check(
                "determinism",
                same,
                "two runs on the same inputs agree"
                if same
                else "two runs on the same inputs disagree (uninitialized memory or a race?)",
            )
        )
    mark = _phase(result, "determinism", mark)
    if timed_ids:
        checks.append(
            _check(
                "timed_outputs",
                not timed_bad,
                timed_bad[0] if timed_bad else f"timed calls {timed_ids}, chosen after they returned, pass every check",
            )
        )
        _phase(result, "timed_outputs", mark)
    result["precision"] = integrity.precision_flags()
    return result
