"""Locked: the jobs of one verification, each run in its own forked process.

Order (the harness drives it): `inputs` imports the pristine reference and writes the init
arguments, weights and inputs for every seed; `candidate` imports model_new.py and the built
extension, writes its outputs and records evidence about each call (fingerprints of its inputs
afterwards, byte ranges for aliasing); it never sees the reference's outputs, which do not exist
yet. `judge` then imports the pristine reference, computes the expected outputs on the device
from the same input files and decides every output check there, in a process the candidate's
code never ran in. Inputs travel as torch.save files (read back with weights_only=True), the
candidate's outputs as raw tensor files (tensor_files.py), all in a directory only the harness
hands out.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

from worker_common import (
    CallCounter,
    apply_precision_flags,
    device_sync,
    fresh_clone,
    load_module,
    python_threads,
    to_cpu,
    to_device,
    trim_exception,
)

import evidence
import guards
import landlock
import tensor_files
# Imported before any candidate code runs, so the integrity snapshot covers it and the timing
# loop is the harness's own, not a module a candidate imported first and then edited.
import timing


_clock = time.perf_counter


def _phase(result: dict, name: str, since: float) -> float:
    """Record how long a phase of this job took (for the stage breakdown); returns now."""
    now = _clock()
    result.setdefault("phases", {})[name] = round(now - since, 4)
    return now


def _check(name: str, passed: bool, detail: str) -> dict:
    return {"name": name, "passed": bool(passed), "detail": detail}


def _seed_all(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def _load(path: Path) -> Any:
    # Memory-mapped: a 64 MB tensor then costs one copy (to the device, or a clone), not two.
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


def _nbytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(o) for o in obj)
    return 0


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------

def run_inputs_job(spec: dict) -> dict:
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
    fingerprints: list[dict] = []
    described = ""
    total_bytes = 0
    for i, seed in enumerate(spec["seeds"]):
        try:
            _seed_all(seed)
            init = list(ref.get_init_inputs()) if callable(getattr(ref, "get_init_inputs", None)) else []
            _seed_all(seed)
            model = ref.Model(*init)
            _seed_all(seed + 1)
            inputs = list(ref.get_inputs())
        except BaseException as exc:
            return {"error": f"building the reference model or its inputs failed: {trim_exception(exc, 400)}"}
        state = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
        payload = {"init": to_cpu(init), "inputs": to_cpu(inputs), "state": state}
        torch.save(payload, out_dir / f"inputs_{i}.pt")
        fingerprints.append(_payload_fingerprints(payload, payload["inputs"], "cpu"))
        if i == 0:
            total_bytes = _nbytes(inputs)
            described = ", ".join(
                f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}" if isinstance(t, torch.Tensor) else repr(t)
                for t in inputs
            )
    # Kept by the harness, away from these files, so the judge can tell if anything rewrote them.
    return {"n": len(spec["seeds"]), "inputs": described, "input_bytes": total_bytes, "fingerprints": fingerprints}


def _payload_fingerprints(payload: dict, inputs: list[Any], device: str) -> dict:
    """Fingerprints of one input set (`inputs`: payload["inputs"], already on `device`) and of
    the init arguments and weights it came with."""
    return {"inputs": evidence.fingerprint(list(inputs)),
            "model": evidence.fingerprint(to_device([payload["init"], list(payload["state"].values())], device))}


def _build_model(cls: type, payload: dict, device: str, seed: int) -> tuple[torch.nn.Module, str]:
    _seed_all(seed)
    model = cls(*to_device(payload["init"], "cpu"))
    note = "seeded init"
    state = payload["state"]
    if isinstance(model, torch.nn.Module):
        own = model.state_dict()
        # Same keys and shapes: give both sides the reference's exact weights.
        if set(own) == set(state) and all(own[k].shape == state[k].shape for k in own):
            model.load_state_dict(state)
            note = "reference weights"
        model = model.to(device)
    return model, note


# ---------------------------------------------------------------------------------------------
# candidate
# ---------------------------------------------------------------------------------------------

def _plain_outputs(out: Any) -> str | None:
    """Why `out` is not a plain tensor (or a tuple/list of them) that can be handed over, else None."""
    items = out if isinstance(out, (tuple, list)) else [out]
    for t in items:
        if type(t) is not torch.Tensor:
            return f"output is {type(t).__module__}.{type(t).__name__}, expected torch.Tensor"
        problem = guards.tensor_problem(t)
        if problem:
            return f"output {problem}"
    return None


def _hook_extension_builders(counter: CallCounter) -> None:
    """Wrap modules that load_inline/load build, so their calls are counted like cuda_extension's."""
    import torch.utils.cpp_extension as ce

    for name in ("load_inline", "load"):
        original = getattr(ce, name)

        def hooked(*args: Any, __original=original, **kwargs: Any) -> Any:
            module = __original(*args, **kwargs)
            return counter.wrap_module(module) if hasattr(module, "__dict__") else module

        setattr(ce, name, hooked)


def _profiled_kernel_names(model: Any, inputs: list[Any]) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        model(*fresh_clone(inputs))
        torch.cuda.synchronize()
    names: set[str] = set()
    for evt in prof.events():
        if getattr(evt, "device_type", None) == torch.autograd.DeviceType.CUDA:
            names.add(evt.name)
    return sorted(names)


def warm_up_cuda() -> None:
    """Initialize CUDA, the caching allocator and cuBLAS the way any candidate's first call would."""
    torch.cuda.init()
    x = torch.ones(64, 64, device="cuda")
    (x @ x).sum().item()
    torch.cuda.synchronize()


def _confine_writes(spec: dict) -> str:
    """From here on this process (and whatever it starts) writes only its own output folders."""
    import tempfile

    private_tmp = Path(spec["out_dir"]).parent / "candidate-tmp"
    private_tmp.mkdir(mode=0o700, exist_ok=True)
    os.environ["TMPDIR"] = str(private_tmp)  # compilers that load_inline runs
    tempfile.tempdir = str(private_tmp)
    writable = [spec["out_dir"], str(private_tmp), *spec.get("writable", [])]
    caches = [spec.get("extensions_dir")] + [os.environ.get(v) for v in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")]
    for folder in filter(None, caches):
        os.makedirs(folder, exist_ok=True)
        writable.append(folder)
    nv_cache = os.path.join(os.path.expanduser("~"), ".nv")  # the CUDA driver's JIT cache
    if os.path.isdir(nv_cache):
        writable.append(nv_cache)
    return landlock.restrict_writes(writable)


def run_candidate_job(spec: dict) -> dict:
    """Import model_new.py with the built extension, run it on every seed, optionally time it."""
    device, policy = spec["device"], spec["policy"]
    result: dict[str, Any] = {"checks": [], "ext_calls": 0, "stage": "import"}
    checks = result["checks"]
    mark = _clock()
    # Before any candidate code (the extension's own initializers included) runs.
    if spec.get("confine_writes"):
        result["write_confinement"] = _confine_writes(spec)
    flags_before = apply_precision_flags()
    counter = CallCounter()
    if spec.get("extensions_dir"):
        os.environ["TORCH_EXTENSIONS_DIR"] = spec["extensions_dir"]
    # load_inline's compiler inherits this: plain ASCII messages, as in the harness's own builds.
    os.environ["LC_ALL"] = "C"
    _hook_extension_builders(counter)
    if spec.get("module_dir"):
        sys.path.insert(0, spec["module_dir"])
        try:
            import cuda_extension
        except BaseException as exc:
            checks.append(_check("import", False, f"the built extension failed to load: {trim_exception(exc, 600)}"))
            return result
        counter.wrap_module(cuda_extension)
    result["ext_functions"] = list(counter.wrapped)
    if device == "cuda":
        # The driver starts threads and torch.cuda rebinds some of its attributes when CUDA
        # comes up; doing it before the baselines keeps an honest candidate from being blamed.
        warm_up_cuda()
    threads_before = python_threads()
    torch_threads_before = torch.get_num_threads()
    # Native threads too: a C++ extension can start threads Python never hears of.
    native_before = guards.thread_baseline()
    snapshot = guards.snapshot_integrity(reference_modules=("model", "reference_model"))

    try:
        cand = load_module(spec["candidate"], "model_new")
    except BaseException as exc:
        text = trim_exception(exc, 4000)
        if "Error building extension" in text or "error:" in text and "cpp_extension" in repr(type(exc)) + text:
            from compiler_errors import trim_compiler_output

            checks.append(_check("compile", False, trim_compiler_output(text, (spec.get("extensions_dir") or "",))))
        else:
            checks.append(_check("import", False, f"model_new.py failed to import: {trim_exception(exc, 800)}"))
        return result
    cls = getattr(cand, "ModelNew", None)
    if not isinstance(cls, type):
        checks.append(_check("import", False, "model_new.py defines no class ModelNew"))
        return result
    checks.append(_check("import", True, "model_new.py and the extension imported"))
    mark = _phase(result, "import", mark)

    result["stage"] = "run"
    in_dir, out_dir = Path(spec["inputs_dir"]), Path(spec["out_dir"])
    violations: list[str] = []
    model = model0 = None
    seed0_inputs = None
    determinism_s = 0.0
    all_inputs: list[Any] = []
    calls_before_runs = counter.calls
    for i in range(spec["n"]):
        payload = _load(in_dir / f"inputs_{i}.pt")
        try:
            model, note = _build_model(cls, payload, device, spec["seeds"][i])
            inputs = to_device(payload["inputs"], device)
            all_inputs.append(inputs)
            args = fresh_clone(inputs)
            guard = guards.StrictOpGuard(policy)
            with torch.no_grad(), guard:
                out = model(*args)
            device_sync(device)
            if guard.violations:
                violations.append(guard.detail())
        except BaseException as exc:
            detail = trim_exception(exc, 800)
            if violations:
                checks.append(_check("torch_ops", False, violations[0]))
            checks.append(_check("crash", False, f"ModelNew raised on seed {i}: {detail}"))
            return result
        result["weights"] = note
        why = _plain_outputs(out)
        if why:
            checks.append(_check("output_type", False, why))
            return result
        # Facts for the judge, taken before anything else runs: what the inputs hold now and
        # where inputs and outputs live (aliasing). The output is saved as it is, device included.
        result.setdefault("evidence", []).append(evidence.call_evidence(args, out))
        tensor_files.save_outputs(out, out_dir / f"cand_{i}")
        del args
        if i == 0:
            model0, seed0_inputs = model, inputs
            since = _clock()
            with torch.no_grad():
                again = model(*fresh_clone(inputs))
            device_sync(device)
            if _plain_outputs(again) is None:
                tensor_files.save_outputs(again, out_dir / "cand_0_again")
            del again
            determinism_s = _clock() - since
        del out
    result["ext_calls"] = counter.calls - calls_before_runs
    mark = _phase(result, "seeds", mark)
    if model0 is not None:
        result["phases"]["determinism"] = round(determinism_s, 4)  # part of "seeds"
    # Counted before the profiler and the timing loop, whose CUPTI and event machinery may start
    # driver threads of their own.
    native_after = guards.native_threads()
    if policy == "strict" or violations:
        checks.append(_check("torch_ops", not violations,
                             violations[0] if violations else "no torch compute ops ran in forward"))

    if device == "cuda" and model0 is not None and seed0_inputs is not None:
        try:
            result["cuda_kernels"] = _profiled_kernel_names(model0, seed0_inputs)
        except BaseException as exc:  # a profiler that cannot start is reported, not fatal
            result["cuda_kernels_error"] = trim_exception(exc, 300)
        mark = _phase(result, "profiler", mark)

    timing_spec = spec.get("timing")
    if timing_spec and model0 is not None and all_inputs:
        result["stage"] = "time"
        measured = timing.time_calls(model0, all_inputs, device, int(timing_spec["trials"]),
                                     int(timing_spec["warmup"]), int(timing_spec.get("flush_bytes", timing.FLUSH_BYTES)),
                                     tuple(timing_spec.get("save_at", ())), timing_spec.get("order"),
                                     timing_spec.get("scales"))
        since = _clock()
        for idx, out in measured.pop("saved").items():
            tensor_files.save_outputs(out, out_dir / f"timed_{idx}")
        # Part of "timing": copying the checked calls' outputs off the device and saving them.
        result.setdefault("phases", {})["timed_saves"] = round(_clock() - since + measured.pop("save_s", 0.0), 4)
        result["timing"] = measured
        result["bandwidth"] = timing.measure_write_bandwidth(device)
        mark = _phase(result, "timing", mark)

    flags_after = guards.precision_flags()
    changed = guards.diff_precision_flags(snapshot.precision, flags_after)
    checks.append(_check("precision_flags", not changed,
                         f"changed by the candidate: {'; '.join(changed)}" if changed
                         else "unchanged: " + ", ".join(f"{k}={v}" for k, v in flags_before.items())))
    threads_after, torch_threads_after = python_threads(), torch.get_num_threads()
    checks.append(_check(
        "threads", threads_after == threads_before and torch_threads_after == torch_threads_before
        and native_after <= native_before,
        f"python threads {threads_before}->{threads_after}, torch threads {torch_threads_before}->{torch_threads_after}, "
        f"native threads {native_before}->{native_after}",
    ))
    problems = list(guards.verify_integrity(snapshot))
    checks.append(_check("harness_integrity", not problems,
                         "; ".join(problems)[:800] if problems else "timers, comparisons and modules untouched"))
    result["precision"] = flags_after
    _phase(result, "guards", mark)
    result["stage"] = "done"
    return result


# ---------------------------------------------------------------------------------------------
# judge
# ---------------------------------------------------------------------------------------------

def run_judge_job(spec: dict) -> dict:
    """Expected outputs from the pristine reference, compared with the candidate's on the device.

    The candidate's code never ran in this process; its outputs arrive as raw tensor files, each
    tensor back on the device the candidate returned it on, and its evidence as JSON numbers.
    """
    apply_precision_flags()
    device = spec["device"]
    atol, rtol = float(spec["atol"]), float(spec["rtol"])
    ref = load_module(spec["reference"], "reference_model")
    in_dir, cand_dir = Path(spec["inputs_dir"]), Path(spec["cand_dir"])
    proofs = spec.get("evidence") or []
    originals = spec.get("fingerprints") or []
    checks: list[dict] = []
    result: dict[str, Any] = {"checks": checks}
    mark = _clock()
    merged: dict[str, dict] = {}

    def merge(i: int, found: list[dict]) -> None:
        for c in found:
            first = merged.setdefault(c["name"], {"name": c["name"], "passed": True, "detail": c["detail"]})
            if not c["passed"] and first["passed"]:
                first.update(passed=False, detail=f"seed {i}: {c['detail']}")

    model0 = first_output = None
    device_inputs: list[Any] = []
    for i in range(spec["n"]):
        payload = _load(in_dir / f"inputs_{i}.pt")
        model, _ = _build_model(ref.Model, payload, device, spec["seeds"][i])
        inputs = to_device(payload["inputs"], device)
        device_inputs.append(inputs)  # the checked timed calls ran on these, rescaled
        found = _payload_fingerprints(payload, inputs, device)
        before = found["inputs"]
        if i < len(originals) and originals[i] != found:
            checks.append(_check("input_files", False, f"seed {i}: the inputs or weights on disk changed after the "
                                 "reference wrote them; something outside the harness rewrote its files"))
            return result
        try:
            with torch.no_grad():
                expected = model(*fresh_clone(inputs))
            device_sync(device)
        except Exception as exc:
            result["reference_error"] = f"seed {i}: {trim_exception(exc, 600)}"
            return result
        try:
            got = tensor_files.load_outputs(cand_dir / f"cand_{i}")
        except Exception as exc:  # files the candidate process left malformed
            checks.append(_check("output_type", False, f"seed {i}: candidate output unreadable: {trim_exception(exc, 300)}"))
            return result
        proof = proofs[i] if i < len(proofs) else {}
        type_check, values = guards.compare_values(expected, got, atol, rtol)
        merge(i, [type_check,
                  evidence.check_aliasing(proof.get("output_ranges", []), proof.get("input_ranges", [])),
                  evidence.check_inputs_unchanged(before, proof.get("inputs_after"))] + values)
        if i == 0:
            model0, first_output = model, got
        del got, expected, payload
    checks.extend(merged.values())
    if originals:
        checks.insert(0, _check("input_files", True, "inputs and weights are the ones the reference wrote"))
    mark = _phase(result, "seeds", mark)

    again = cand_dir / "cand_0_again"
    if tensor_files.exists(again):
        same = guards.all_close(first_output, tensor_files.load_outputs(again), atol, rtol)
        checks.append(_check("determinism", same, "two runs on the same inputs agree" if same
                             else "two runs on the same inputs disagree (uninitialized memory or a race?)"))
    del first_output
    mark = _phase(result, "determinism", mark)
    # [call index, input set, scale]: which timed calls were kept and which inputs they got.
    timed = sorted((int(i), int(k), float(s)) for i, k, s in spec.get("timed", []))
    if timed and model0 is not None:
        bad = []
        for i, k, scale in timed:
            with torch.no_grad():
                expected = model0(*timing.scaled_inputs(device_inputs[k], scale))
            device_sync(device)
            path = cand_dir / f"timed_{i}"
            if not tensor_files.exists(path) or not guards.all_close(expected, tensor_files.load_outputs(path), atol, rtol):
                bad.append(i)
        calls = [i for i, _, _ in timed]
        checks.append(_check("timed_outputs", not bad,
                             f"timed calls {bad} returned wrong outputs" if bad
                             else f"outputs of timed calls {calls} match the reference"))
        mark = _phase(result, "timed_outputs", mark)
    result["precision"] = guards.precision_flags()
    return result
