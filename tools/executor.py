"""Locked: the processes that only execute calls, driven over a channel by the controller.

`serve_candidate` is the one process where candidate code runs. Before anything of the
candidate is loaded (the extension's own initializers included) it confines its writes, pins
the precision flags and takes every snapshot (integrity, threads); then it imports the
extension and model_new.py and answers requests: build the models, make calls, reveal kept
outputs, finish. Every call, checked or timed, goes through the same `timing.Caller.call` under
the same strict op guard, with inputs made from a seed that arrives with the request; the
output is kept, and its fingerprint and evidence are sent back at once, so the process commits
to each output before anyone has chosen which outputs will be looked at.

`serve_baselines` runs the pristine reference, eager and torch.compile, the same way.

Nothing here decides a verdict or a time: replies are claims, and the controller and the judge
check them.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

import channel
import evidence
import guards
import landlock
import tensor_files
import timing
from worker_common import (
    apply_precision_flags,
    device_sync,
    load_module,
    python_threads,
    to_device,
    trim_exception,
)

_clock = time.perf_counter


def _check(name: str, passed: bool, detail: str) -> dict:
    return {"name": name, "passed": bool(passed), "detail": detail}


def load_set(path: Path) -> Any:
    # Memory-mapped: a 64 MB tensor then costs one copy (to the device, or a clone), not two.
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


def build_model(cls: type, payload: dict, device: str, seed: int) -> tuple[Any, str]:
    import random

    random.seed(seed)
    torch.manual_seed(seed)
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


class ExtensionMeter:
    """Counts calls into a compiled extension's functions and the time spent inside them.

    Wrapping happens before model_new.py is imported, so `from cuda_extension import f` and
    `cuda_extension.f` both reach the wrapper. On the CPU the time inside the extension is what
    shows that it did the work, not merely that one of its functions was entered.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.wrapped: list[str] = []

    def wrap_module(self, module: Any) -> Any:
        for attr in dir(module):
            fn = getattr(module, attr)
            if attr.startswith("__") or not callable(fn) or type(fn).__name__ != "builtin_function_or_method":
                continue
            setattr(module, attr, self._wrap(fn))
            self.wrapped.append(attr)
        return module

    def _wrap(self, fn: Any) -> Any:
        meter = self

        def metered(*args: Any, **kwargs: Any) -> Any:
            meter.calls += 1
            t0 = _clock()
            try:
                return fn(*args, **kwargs)
            finally:
                meter.seconds += _clock() - t0

        metered.__name__ = getattr(fn, "__name__", "extension_function")
        metered.__doc__ = fn.__doc__
        return metered


def _hook_extension_builders(meter: ExtensionMeter) -> None:
    """Wrap modules that load_inline/load build, so their calls are metered like cuda_extension's."""
    import torch.utils.cpp_extension as ce

    for name in ("load_inline", "load"):
        original = getattr(ce, name)

        def hooked(*args: Any, __original=original, **kwargs: Any) -> Any:
            module = __original(*args, **kwargs)
            return meter.wrap_module(module) if hasattr(module, "__dict__") else module

        setattr(ce, name, hooked)


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


def _profiled_kernel_names(fn: Any, inputs: list[Any]) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*timing.call_inputs(inputs, 0, "cuda"))
        torch.cuda.synchronize()
    names: set[str] = set()
    for evt in prof.events():
        if getattr(evt, "device_type", None) == torch.autograd.DeviceType.CUDA:
            names.add(evt.name)
    return sorted(names)


def _output_bytes(out: Any) -> int:
    items = out if isinstance(out, (tuple, list)) else [out]
    return sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))


def _reserve(device: str, nbytes: int) -> None:
    """Have the caching allocator hold `nbytes` before the window, so the outputs kept while
    timed are carved from it rather than each costing a cudaMalloc inside a call (the baselines
    free theirs, so their allocator hands the same blocks back: both sides allocate cheaply)."""
    if device == "cuda" and nbytes > 0:
        torch.empty(nbytes, dtype=torch.uint8, device="cuda")  # freed at once, kept by the allocator


class _Sets:
    """Input sets and weights written by the inputs job, loaded once each."""

    def __init__(self, folder: Path, device: str) -> None:
        self.folder, self.device = folder, device
        self.payloads: dict[int, dict] = {}
        self.inputs: dict[int, list[Any]] = {}

    def payload(self, k: int) -> dict:
        if k not in self.payloads:
            self.payloads[k] = load_set(self.folder / f"inputs_{k}.pt")
        return self.payloads[k]

    def device_inputs(self, k: int) -> list[Any]:
        if k not in self.inputs:
            self.inputs[k] = to_device(self.payload(k)["inputs"], self.device)
        return self.inputs[k]


def _await_go(chan: channel.Channel, call_id: int) -> bool:
    """Say the call's inputs are ready and wait for the word to make it: the controller's clock
    runs from that word to the call's `done`."""
    chan.send({"ready": call_id})
    try:
        return chan.recv().get("go") == call_id
    except channel.ChannelClosed:
        return False


def _serve(chan: channel.Channel, handlers: dict[str, Any]) -> None:
    while True:
        try:
            request = chan.recv()
        except channel.ChannelClosed:
            return
        op = request.get("op")
        if op not in handlers:
            chan.send({"ok": False, "error": f"unknown request {op!r}"})
            continue
        reply = handlers[op](request)
        chan.send(reply)
        if op == "finish":
            return


# ---------------------------------------------------------------------------------------------
# candidate
# ---------------------------------------------------------------------------------------------

def serve_candidate(spec: dict, chan: channel.Channel) -> None:
    device, policy = spec["device"], spec["policy"]
    claims: dict[str, Any] = {"checks": [], "phases": {}}
    checks = claims["checks"]
    mark = _clock()
    # Before any candidate code (the extension's own initializers included) runs.
    if spec.get("confine_writes"):
        claims["write_confinement"] = _confine_writes(spec)
    flags_before = apply_precision_flags()
    meter = ExtensionMeter()
    if spec.get("extensions_dir"):
        os.environ["TORCH_EXTENSIONS_DIR"] = spec["extensions_dir"]
    # load_inline's compiler inherits this: plain ASCII messages, as in the harness's own builds.
    os.environ["LC_ALL"] = "C"
    _hook_extension_builders(meter)
    if device == "cuda":
        # The driver starts threads and torch.cuda rebinds some of its attributes when CUDA
        # comes up; done before the snapshots, an honest candidate is not blamed for it.
        warm_up_cuda()
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    threads_before = python_threads()
    torch_threads_before = torch.get_num_threads()
    # Native threads too: a C++ extension can start threads Python never hears of.
    native_before = guards.thread_baseline()
    # Every snapshot before the extension is imported: what its initializers do is a change.
    snapshot = guards.snapshot_integrity(reference_modules=("model", "reference_model"))
    caller = timing.Caller(device, int(spec.get("flush_bytes", timing.FLUSH_BYTES)))

    def fail(check: dict) -> None:
        checks.append(check)
        chan.send({"ok": False, "claims": claims})

    if spec.get("module_dir"):
        sys.path.insert(0, spec["module_dir"])
        try:
            import cuda_extension
        except BaseException as exc:
            return fail(_check("import", False, f"the built extension failed to load: {trim_exception(exc, 600)}"))
        meter.wrap_module(cuda_extension)
    try:
        cand = load_module(spec["candidate"], "model_new")
    except BaseException as exc:
        text = trim_exception(exc, 4000)
        if "Error building extension" in text or "error:" in text and "cpp_extension" in repr(type(exc)) + text:
            from compiler_errors import trim_compiler_output

            return fail(_check("compile", False, trim_compiler_output(text, (spec.get("extensions_dir") or "",))))
        return fail(_check("import", False, f"model_new.py failed to import: {trim_exception(exc, 800)}"))
    cls = getattr(cand, "ModelNew", None)
    if not isinstance(cls, type):
        return fail(_check("import", False, "model_new.py defines no class ModelNew"))
    checks.append(_check("import", True, "model_new.py and the extension imported"))
    claims["ext_functions"] = list(meter.wrapped)
    claims["phases"]["import"] = round(_clock() - mark, 4)
    chan.send({"ok": True})

    sets = _Sets(Path(spec["inputs_dir"]), device)
    out_dir = Path(spec["out_dir"])
    models: dict[int, Any] = {}
    kept: dict[int, Any] = {}
    violations: list[str] = []
    forward: dict[str, Any] = {"seconds": 0.0, "ext_seconds": 0.0, "ext_calls": 0, "ext_shares": []}

    def build(request: dict) -> dict:
        try:
            for m in request["models"]:
                models[int(m)], claims["weights"] = build_model(cls, sets.payload(int(m)), device, int(spec["seeds"][m]))
        except BaseException as exc:
            checks.append(_check("crash", False, f"ModelNew could not be built: {trim_exception(exc, 800)}"))
            return {"ok": False}
        return {"ok": True}

    def calls(request: dict) -> dict:
        events, walls, fps, proofs = [], [], [], []
        for c in request["calls"]:
            model = models[int(c["model"])]
            args = caller.prepare(sets.device_inputs(int(c["set"])), int(c["seed"]))
            if not _await_go(chan, int(c["id"])):
                return {"ok": False, "error": "the call was not asked for"}
            guard = guards.StrictOpGuard(policy)
            calls0, ext0 = meter.calls, meter.seconds
            try:
                out, event_us, wall_us = caller.run(model, args, guard)
            except BaseException as exc:
                chan.send({"done": int(c["id"]), "ok": False})
                if guard.violations:
                    violations.append(guard.detail())
                checks.append(_check("crash", False, f"ModelNew raised on call {c['id']}: {trim_exception(exc, 800)}"))
                return {"ok": False}
            chan.send({"done": int(c["id"]), "ok": True})
            if guard.violations:
                violations.append(guard.detail())
            forward["seconds"] += wall_us / 1e6
            forward["ext_seconds"] += meter.seconds - ext0
            forward["ext_calls"] += meter.calls - calls0
            if len(forward["ext_shares"]) < 64:
                forward["ext_shares"].append(round((meter.seconds - ext0) / (wall_us / 1e6), 4) if wall_us > 0 else 1.0)
            why = _plain_outputs(out)
            if why:
                checks.append(_check("output_type", False, f"call {c['id']}: {why}"))
                return {"ok": False}
            # Facts for the judge, taken before anything else runs: what the inputs hold now,
            # where inputs and outputs live (aliasing), and the output's own fingerprint.
            proofs.append(evidence.call_evidence(args, out))
            fps.append(evidence.fingerprint(list(out) if isinstance(out, (tuple, list)) else [out]))
            device_sync(device)
            kept[int(c["id"])] = out
            events.append(event_us)
            walls.append(wall_us)
            del args
        return {"ok": True, "events_us": events, "walls_us": walls, "fingerprints": fps, "evidence": proofs}

    native: dict[str, int] = {}

    def checkpoint(request: dict) -> dict:
        # Counted after the checked calls and before the profiler and the timing, whose CUPTI
        # and event machinery start driver threads of their own.
        native["after_calls"] = guards.native_threads()
        return {"ok": True}

    def kernels(request: dict) -> dict:
        try:
            names = _profiled_kernel_names(models[0], sets.device_inputs(0))
            return {"ok": True, "names": names}
        except BaseException as exc:  # a profiler that cannot start is reported, not fatal
            return {"ok": True, "error": trim_exception(exc, 300)}

    def reveal(request: dict) -> dict:
        for i in request["ids"]:
            out = kept.get(int(i))
            if out is not None:
                tensor_files.save_outputs(out, out_dir / f"call_{int(i)}")
        return {"ok": True}

    def drop(request: dict) -> dict:
        for i in request["ids"]:
            kept.pop(int(i), None)
        return {"ok": True}

    def reserve(request: dict) -> dict:
        _reserve(device, int(request.get("bytes", 0)))
        return {"ok": True, "output_bytes": _output_bytes(kept.get(0))}

    def finish(request: dict) -> dict:
        native_after = native.get("after_calls", guards.native_threads())
        if policy == "strict" or violations:
            checks.append(_check("torch_ops", not violations,
                                 violations[0] if violations else "no torch compute ops ran in forward"))
        flags_after = guards.precision_flags()
        changed = guards.diff_precision_flags(snapshot.precision, flags_after)
        checks.append(_check("precision_flags", not changed,
                             f"changed by the candidate: {'; '.join(changed)}" if changed
                             else "unchanged: " + ", ".join(f"{k}={v}" for k, v in flags_before.items())))
        threads_after, torch_threads_after = python_threads(), torch.get_num_threads()
        checks.append(_check(
            "threads", threads_after == threads_before and torch_threads_after == torch_threads_before
            and native_after <= native_before,
            f"python threads {threads_before}->{threads_after}, torch threads {torch_threads_before}->"
            f"{torch_threads_after}, native threads {native_before}->{native_after}",
        ))
        problems = list(guards.verify_integrity(snapshot))
        checks.append(_check("harness_integrity", not problems,
                             "; ".join(problems)[:800] if problems else "timers, comparisons and modules untouched"))
        claims["precision"] = flags_after
        claims.update(forward)
        claims["bandwidth"] = timing.measure_write_bandwidth(device) if request.get("bandwidth") else None
        return {"ok": True, "claims": claims}

    _serve(chan, {"build": build, "calls": calls, "checkpoint": checkpoint, "kernels": kernels, "reveal": reveal,
                  "drop": drop, "reserve": reserve, "finish": finish})


# ---------------------------------------------------------------------------------------------
# baselines
# ---------------------------------------------------------------------------------------------

def _dynamo_graphs() -> int:
    try:
        from torch._dynamo.utils import counters

        return int(sum(counters["stats"].values())) + int(sum(counters["recompiles"].values()))
    except Exception:
        return 0


def serve_baselines(spec: dict, chan: channel.Channel) -> None:
    """Eager and torch.compile on the pristine reference, timed exactly like the candidate."""
    device = spec["device"]
    info: dict[str, Any] = {"precision": apply_precision_flags()}
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    ref = load_module(spec["reference"], "reference_model")
    sets = _Sets(Path(spec["inputs_dir"]), device)
    model, _ = build_model(ref.Model, sets.payload(0), device, int(spec["seeds"][0]))
    if device == "cuda":
        warm_up_cuda()
    caller = timing.Caller(device, int(spec.get("flush_bytes", timing.FLUSH_BYTES)))
    sides: dict[str, Any] = {"eager": model}
    warm_sets = [int(k) for k in spec["timed_sets"]]
    try:
        compiled = torch.compile(model)
        # Warmed until steady: a first call compiles, later ones may still specialize; the
        # window starts once the last few calls agree and no new graph was made.
        recent: list[float] = []
        for i in range(40):
            before = _dynamo_graphs()
            _, _, us, _ = caller.call(compiled, sets.device_inputs(warm_sets[i % len(warm_sets)]), 10_000 + i)
            recent = (recent + [us])[-4:]
            if i >= 3 and _dynamo_graphs() == before and max(recent) <= 1.15 * min(recent):
                break
        sides["compile"] = compiled
    except Exception as exc:  # no C++ compiler for inductor, an op it cannot trace, ...
        info["compile_error"] = trim_exception(exc, 600)
    graphs_at_start = _dynamo_graphs()
    chan.send({"ok": True, "sides": sorted(sides)})

    def calls(request: dict) -> dict:
        fn = sides[request["side"]]
        events, walls, fps, proofs = [], [], [], []
        try:
            for c in request["calls"]:
                args = caller.prepare(sets.device_inputs(int(c["set"])), int(c["seed"]))
                if not _await_go(chan, int(c["id"])):
                    return {"ok": False, "error": "the call was not asked for"}
                try:
                    out, event_us, wall_us = caller.run(fn, args)
                finally:
                    chan.send({"done": int(c["id"]), "ok": True})
                # What the candidate's process does after each call, and a reply of the same
                # size, so both sides pay the same for everything around the call.
                proofs.append(evidence.call_evidence(args, out))
                fps.append(evidence.fingerprint(list(out) if isinstance(out, (tuple, list)) else [out]))
                device_sync(device)
                events.append(event_us)
                walls.append(wall_us)
                del out, args
        except Exception as exc:
            return {"ok": False, "error": trim_exception(exc, 600)}
        return {"ok": True, "events_us": events, "walls_us": walls, "fingerprints": fps, "evidence": proofs}

    def finish(request: dict) -> dict:
        info["recompiles_in_window"] = _dynamo_graphs() - graphs_at_start
        return {"ok": True, "info": info}

    _serve(chan, {"calls": calls, "finish": finish})
