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
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import channel
import evidence
import guards
import init_objects
import landlock
import process_filter
import roofline
import tensor_files
import timing
import torch
import wire
from worker_common import (
    apply_precision_flags,
    device_sync,
    load_module,
    python_threads,
    to_device,
    trim_exception,
)

_clock = time.perf_counter


def _check(name: str, passed: bool, detail: str) -> wire.Check:
    return {"name": name, "passed": bool(passed), "detail": detail}


def load_set(path: Path, objects: str = "real") -> Any:
    """One input set. Constructor arguments that are objects of the user's code come as the
    real objects (`objects="real"`: a trusted process with the reference loaded) or as stand-ins
    (`"stand-ins"`: the candidate's process, which never imports the reference); either way in
    payload["init_args"], while payload["init"] keeps what the fingerprints cover."""
    # Memory-mapped: a 64 MB tensor then costs one copy (to the device, or a clone), not two.
    payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    if payload.get("init_pickle"):
        payload["init_args"] = (
            init_objects.load_real(path.parent, payload)
            if objects == "real"
            else init_objects.standins(payload["init"])
        )
    return payload


def _weights_fit(own: dict, state: dict) -> bool:
    """Same keys and shapes: the reference's exact weights can be given to this model."""
    return set(own) == set(state) and all(own[k].shape == state[k].shape for k in own)


def build_model(cls: type, payload: dict, device: str, seed: int) -> tuple[Any, str]:
    import random

    random.seed(seed)
    torch.manual_seed(seed)
    model = cls(*to_device(payload.get("init_args", payload["init"]), "cpu"))
    note = "seeded init"
    state = payload["state"]
    if isinstance(model, torch.nn.Module):
        if _weights_fit(model.state_dict(), state):
            model.load_state_dict(state)
            note = "reference weights"
        model = model.to(device)
    return model, note


def _storages(out: Any) -> list[int]:
    """Where the tensors of an output keep their data (storage addresses; empty ones have none)."""
    return [
        t.untyped_storage().data_ptr()
        for t in (out if isinstance(out, (tuple, list)) else [out])
        if isinstance(t, torch.Tensor) and t.numel()
    ]


class KeptOutputs:
    """The outputs of the calls made so far, by call id, and which call's output holds each
    storage. A timed window keeps hundreds of outputs: asking whether a new output reuses a kept
    one's memory must cost the same on its first call and its last, or later blocks carry more
    harness work around each call than earlier ones and the clock's bound charges it to the
    kernel."""

    def __init__(self) -> None:
        self._outputs: dict[int, Any] = {}
        self._owner: dict[int, int] = {}

    def get(self, cid: int) -> Any:
        return self._outputs.get(cid)

    def reused_by(self, out: Any) -> int | None:
        """The id of a kept earlier output whose memory `out` shares, or None. Kept outputs are
        still referenced, so the allocator cannot hand their memory out again: sharing it means
        the module returned a buffer of its own twice."""
        for ptr in _storages(out):
            if ptr in self._owner:
                return self._owner[ptr]
        return None

    def keep(self, cid: int, out: Any) -> None:
        self.drop(cid)
        self._outputs[cid] = out
        for ptr in _storages(out):
            self._owner.setdefault(ptr, cid)

    def drop(self, cid: int) -> None:
        out = self._outputs.pop(cid, None)
        if out is not None:
            for ptr in _storages(out):
                if self._owner.get(ptr) == cid:
                    del self._owner[ptr]


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


def run_inline_build_job(spec: dict) -> wire.CompileResult:
    """A single-file candidate's import, alone: the extension its load_inline builds lands in the
    extensions folder the evaluation's candidate process imports it from, which then only loads
    it. Confined as that process is (its writes to its own folders), since model_new.py is the
    candidate's code; nothing it does here is timed or checked. What the compile job answers:
    ok, the compiler's first errors, the seconds it took."""
    start = _clock()
    if spec.get("confine_writes"):
        _confine_writes(spec)
    os.environ["TORCH_EXTENSIONS_DIR"] = spec["extensions_dir"]
    os.environ["LC_ALL"] = "C"
    try:
        load_module(spec["candidate"], "model_new")
    except BaseException as exc:
        text = f"{type(exc).__name__}: {exc}"
        if "Error building extension" in text or "error:" in text:
            from compiler_errors import trim_compiler_output

            return {
                "ok": False,
                "errors": trim_compiler_output(text, (spec["extensions_dir"],)),
                "seconds": _clock() - start,
            }
        # Not a build failure: the evaluation's import reports it where it belongs.
        return {"ok": True, "import_error": trim_exception(exc, 600), "seconds": _clock() - start}
    return {"ok": True, "seconds": _clock() - start}


def _profiled_kernel_names(fn: Any, inputs: list[Any]) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    # The inputs are made before the profiler starts: the harness's own copies and draws are not
    # the candidate's kernels, and under strict torch's compute kernels seen here fail the round.
    args = timing.call_inputs(inputs, 0, "cuda")
    torch.cuda.synchronize()
    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    names: set[str] = set()
    for evt in prof.events():
        if getattr(evt, "device_type", None) == torch.autograd.DeviceType.CUDA:
            names.add(evt.name)
    return sorted(names)


# The most ops beyond its outputs' allocations that the stand-in dispatches for a null call.
STAND_IN_OPS_MOST = 64


def _stand_in(template: Any, ops: int = 0) -> Any:
    """A callable returning new, unfilled outputs shaped like `template`, dispatching `ops` ops
    in all (its outputs' allocations, then empty ones): the op guard's dispatch of each op a
    real forward runs is host time around the call that its device events never see, and the
    null blocks that measure that time must pay it too, or the clock's bound charges it to the
    kernel."""
    items = template if isinstance(template, (tuple, list)) else [template]
    tensors = [t for t in items if isinstance(t, torch.Tensor)]
    where = tensors[0].device if tensors else torch.device("cpu")
    extra = max(0, min(int(ops) - len(tensors), STAND_IN_OPS_MOST))

    def outputs(*args: Any) -> Any:
        for _ in range(extra):
            torch.empty(0, device=where)
        made = [torch.empty_like(t) for t in tensors]
        return made[0] if not isinstance(template, (tuple, list)) else tuple(made)

    return outputs


def _output_bytes(out: Any) -> int:
    items = out if isinstance(out, (tuple, list)) else [out]
    return sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))


# The harness starts every timed process with glibc's mmap threshold at 32 MB and no trimming
# (harness/pool.py): allocations below it come from the heap and freed ones stay mapped.
_MMAP_THRESHOLD = 32 << 20
_HEAP_CHUNK = 8 << 20
_HEAP_RESERVE_MOST = (2 << 30) + (64 << 20)  # the CPU's budget for kept outputs, and the margin


def _reserve(device: str, nbytes: int, output_bytes: int = 0) -> None:
    """Have the allocator hold `nbytes` before the window, so the outputs kept while timed are
    carved from it rather than each costing a cudaMalloc, or on the CPU fresh page faults,
    inside a call (the baselines free theirs, so their allocator hands the same blocks back:
    both sides allocate cheaply)."""
    if device == "cuda" and nbytes > 0:
        torch.empty(nbytes, dtype=torch.uint8, device="cuda")  # freed at once, kept by the allocator
    elif device == "cpu" and nbytes > 0 and 0 < output_bytes < _MMAP_THRESHOLD - (1 << 20):
        # Blocks that each hold whole outputs, touched, then freed into the heap, which is never
        # trimmed: the kept outputs reuse pages already faulted in, as the null blocks' unkept
        # outputs and the baselines' freed ones do. (Outputs over the threshold are fresh
        # mappings on every side alike.)
        chunk = max(_HEAP_CHUNK, output_bytes + (1 << 20))
        per_chunk = chunk // output_bytes
        count = min(nbytes, _HEAP_RESERVE_MOST) // (per_chunk * output_bytes) + 1
        chunks = [torch.zeros(chunk, dtype=torch.uint8) for _ in range(count)]
        del chunks


class _Sets:
    """Input sets and weights written by the inputs job, loaded once each."""

    def __init__(self, folder: Path, device: str, objects: str = "real") -> None:
        self.folder, self.device, self.objects = folder, device, objects
        self.payloads: dict[int, dict] = {}
        self.inputs: dict[int, list[Any]] = {}

    def payload(self, k: int) -> dict:
        if k not in self.payloads:
            self.payloads[k] = load_set(self.folder / f"inputs_{k}.pt", self.objects)
        return self.payloads[k]

    def device_inputs(self, k: int) -> list[Any]:
        if k not in self.inputs:
            self.inputs[k] = to_device(self.payload(k)["inputs"], self.device)
        return self.inputs[k]


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
    evidence.session_device(device)
    claims: wire.Claims = {"checks": [], "phases": {}}
    checks = claims["checks"]
    mark = _clock()
    # Caches of its own: torch.compile's and triton's caches are what the baselines read, so
    # nothing this process writes can be loaded by them.
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        if os.environ.get(var):
            os.environ[var] = os.environ[var].rstrip("/") + "-candidate"
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
    caller = timing.Caller(device, int(spec.get("flush_bytes", timing.FLUSH_BYTES)), plan=spec.get("plan"))
    caller_state = caller.state()
    caller_changes: list[str] = []  # seen at the end of a block, before anything could put it back

    def fail(check: wire.Check) -> None:
        checks.append(check)
        chan.send({"ok": False, "claims": claims})

    if spec.get("module_dir"):
        # Built by the harness already: nothing the candidate runs needs a process of its own.
        claims["process_filter"] = process_filter.install()
        sys.path.insert(0, spec["module_dir"])
        try:
            import cuda_extension
        except BaseException as exc:
            return fail(_check("import", False, f"the built extension failed to load: {trim_exception(exc, 600)}"))
        meter.wrap_module(cuda_extension)
    try:
        cand = load_module(spec["candidate"], "model_new")
    except BaseException as exc:
        # The whole text: a failed build's message holds ninja's command lines (thousands of
        # characters each for nvcc) before the compiler's own `file.cu(42): error:` lines.
        text = f"{type(exc).__name__}: {exc}"
        if "Error building extension" in text or "error:" in text and "cpp_extension" in repr(type(exc)) + text:
            from compiler_errors import trim_compiler_output

            return fail(_check("compile", False, trim_compiler_output(text, (spec.get("extensions_dir") or "",))))
        return fail(_check("import", False, f"model_new.py failed to import: {trim_exception(exc, 800)}"))
    if "process_filter" not in claims:  # a single-file candidate built its extension as it imported
        claims["process_filter"] = process_filter.install()
    cls = getattr(cand, "ModelNew", None)
    if not isinstance(cls, type):
        return fail(_check("import", False, "model_new.py defines no class ModelNew"))
    checks.append(_check("import", True, "model_new.py and the extension imported"))
    claims["ext_functions"] = list(meter.wrapped)
    claims["phases"]["import"] = round(_clock() - mark, 4)
    chan.send({"ok": True})

    sets = _Sets(Path(spec["inputs_dir"]), device, objects="stand-ins")
    out_dir = Path(spec["out_dir"])
    models: dict[int, Any] = {}
    kept = KeptOutputs()
    violations: list[str] = []
    dispatched: list[int] = []  # ops each real call's forward ran through the op guard
    forward: wire.ForwardTime = {"seconds": 0.0, "ext_seconds": 0.0, "ext_calls": 0, "ext_shares": []}

    def build(request: dict) -> dict:
        try:
            for m in request["models"]:
                models[int(m)], claims["weights"] = build_model(
                    cls, sets.payload(int(m)), device, int(spec["seeds"][m])
                )
        except BaseException as exc:
            checks.append(_check("crash", False, f"ModelNew could not be built: {trim_exception(exc, 800)}"))
            return {"ok": False}
        return {"ok": True}

    def stand_in_ops() -> int:
        # As many ops as the real calls' forward dispatched through the op guard.
        return int(statistics.median(dispatched)) if dispatched else 0

    def keep_output(cid: int, out: Any) -> bool:
        """Keep a real call's output for the checks; False (and `output_reused`) where it is the
        memory of an output kept already."""
        earlier = kept.reused_by(out)
        if earlier is not None:
            checks.append(
                _check(
                    "output_reused",
                    False,
                    f"call {cid} returned the memory of call "
                    f"{earlier}'s output, which the caller still holds: a module whose earlier "
                    "outputs change under the caller's feet is not a drop-in replacement; "
                    "allocate each output (torch::empty) instead of reusing a buffer",
                )
            )
            return False
        kept.keep(cid, out)
        return True

    def calls(request: dict) -> dict:
        # A null block makes the same calls with everything around them, but what is called is
        # the harness's own stand-in (outputs of the first verified call's shapes, never filled):
        # its time from outside is this process's own overhead per call, which no candidate code
        # runs during and which bounds the candidate's claims (harness/scoring.py).
        null = bool(request.get("null"))
        template = kept.get(0)
        ops = stand_in_ops() if null else 0
        events, walls, fps, proofs, leads, flushes = [], [], [], [], [], []
        for c in request["calls"]:
            model = _stand_in(template, ops) if null else models[int(c["model"])]
            args = caller.prepare(sets.device_inputs(int(c["set"])))
            guard = guards.StrictOpGuard(policy)
            calls0, ext0 = meter.calls, meter.seconds
            try:
                out, event_us, wall_us = caller.run(model, args, int(c["seed"]), guard)
            except BaseException as exc:
                if guard.violations:
                    violations.append(guard.detail())
                checks.append(_check("crash", False, f"ModelNew raised on call {c['id']}: {trim_exception(exc, 800)}"))
                return {"ok": False}
            if not null:
                if guard.violations:
                    violations.append(guard.detail())
                dispatched.append(guard.dispatched)
                forward["seconds"] += wall_us / 1e6
                forward["ext_seconds"] += meter.seconds - ext0
                forward["ext_calls"] += meter.calls - calls0
                if len(forward["ext_shares"]) < 64:
                    forward["ext_shares"].append(
                        round((meter.seconds - ext0) / (wall_us / 1e6), 4) if wall_us > 0 else 1.0
                    )
            why = _plain_outputs(out)
            if why and not null:
                checks.append(_check("output_type", False, f"call {c['id']}: {why}"))
                return {"ok": False}
            # Facts for the judge, taken before anything else runs: what the inputs hold now,
            # where inputs and outputs live (aliasing), and the output's own fingerprint.
            proofs.append(evidence.call_evidence(args, out))
            fps.append(evidence.fingerprint(list(out) if isinstance(out, (tuple, list)) else [out]))
            device_sync(device)
            if not null:
                if not keep_output(int(c["id"]), out):
                    return {"ok": False}
            events.append(event_us)
            walls.append(wall_us)
            if caller.lead_us is not None:
                leads.append(caller.lead_us)
            if caller.flush_us is not None:
                flushes.append(caller.flush_us)
            del args, out
        if not caller_changes:
            caller_changes.extend(caller.changes(caller_state))
        return {
            "ok": True,
            "events_us": events,
            "walls_us": walls,
            "fingerprints": fps,
            "evidence": proofs,
            "leads_us": leads,
            "flushes_us": flushes,
        }

    # A burst's calls between its three requests: made (inputs), run (outputs), committed.
    burst_state: dict[str, Any] = {}

    def burst_prepare(request: dict) -> dict:
        burst_state.clear()
        try:
            made = [caller.burst_inputs(sets.device_inputs(int(c["set"])), int(c["seed"])) for c in request["calls"]]
            device_sync(device)
        except BaseException as exc:
            checks.append(_check("crash", False, f"a burst's inputs could not be made: {trim_exception(exc, 400)}"))
            return {"ok": False}
        burst_state.update(calls=list(request["calls"]), inputs=made, null=bool(request.get("null")))
        # How many ops its null calls' stand-in dispatches (as many as its real calls ran through
        # the op guard): the baselines' null bursts dispatch as many.
        return {"ok": True, "ops": stand_in_ops()}

    def burst_run(request: dict) -> dict:
        # Timed from outside, request to reply: the calls and nothing else. The reply says only
        # that they are done; what they returned is committed to by the next request.
        null = bool(burst_state.get("null"))
        fn = _stand_in(kept.get(0), stand_in_ops()) if null else models[0]
        try:
            outs, used = caller.burst(fn, burst_state.get("inputs") or [], lambda: guards.StrictOpGuard(policy), null)
        except BaseException as exc:
            checks.append(_check("crash", False, f"ModelNew raised in a burst of calls: {trim_exception(exc, 800)}"))
            return {"ok": False}
        if null:
            burst_state.clear()
            return {"ok": True}
        for guard in used:
            if guard.violations:
                violations.append(guard.detail())
            dispatched.append(guard.dispatched)
        burst_state["outputs"] = outs
        return {"ok": True}

    def burst_commit(request: dict) -> dict:
        fps, proofs = [], []
        for c, args, out in zip(
            burst_state.get("calls") or [], burst_state.get("inputs") or [], burst_state.get("outputs") or []
        ):
            why = _plain_outputs(out)
            if why:
                checks.append(_check("output_type", False, f"call {c['id']}: {why}"))
                return {"ok": False}
            proofs.append(evidence.call_evidence(args, out))
            fps.append(evidence.fingerprint(list(out) if isinstance(out, (tuple, list)) else [out]))
            if not keep_output(int(c["id"]), out):
                return {"ok": False}
        burst_state.clear()
        device_sync(device)
        return {"ok": True, "fingerprints": fps, "evidence": proofs}

    native: dict[str, int] = {}

    def checkpoint(request: dict) -> dict:
        # Counted after the verification calls and before the profiler, whose CUPTI machinery
        # starts driver threads of its own; then again right before the timed window, so a thread
        # the candidate starts while timed is seen too.
        native[str(request.get("stage") or "after_calls")] = guards.native_threads()
        return {"ok": True}

    def kernels(request: dict) -> dict:
        try:
            names = _profiled_kernel_names(models[0], sets.device_inputs(0))
            return {"ok": True, "names": names}
        except BaseException as exc:  # a profiler that cannot start is reported, not fatal
            return {"ok": True, "error": trim_exception(exc, 300)}

    def reveal(request: dict) -> dict:
        items = [(kept.get(int(i)), out_dir / f"call_{int(i)}") for i in request["ids"]]
        errors = tensor_files.save_many([(out, base) for out, base in items if out is not None])
        if errors:
            raise errors[0]
        return {"ok": True}

    def drop(request: dict) -> dict:
        for i in request["ids"]:
            kept.drop(int(i))
        return {"ok": True}

    def reserve(request: dict) -> dict:
        size = _output_bytes(kept.get(0))
        _reserve(device, int(request.get("bytes", 0)), size)
        return {"ok": True, "output_bytes": size}

    def finish(request: dict) -> dict:
        native_end = guards.native_threads()
        native_after = native.get("after_calls", native_end)
        native_timed = native.get("before_timing", native_end)
        if policy == "strict" or violations:
            checks.append(
                _check(
                    "torch_ops", not violations, violations[0] if violations else "no torch compute ops ran in forward"
                )
            )
        flags_after = guards.precision_flags()
        changed = guards.diff_precision_flags(snapshot.precision, flags_after)
        checks.append(
            _check(
                "precision_flags",
                not changed,
                f"changed by the candidate: {'; '.join(changed)}"
                if changed
                else "unchanged: " + ", ".join(f"{k}={v}" for k, v in flags_before.items()),
            )
        )
        threads_after, torch_threads_after = python_threads(), torch.get_num_threads()
        checks.append(
            _check(
                "threads",
                threads_after == threads_before
                and torch_threads_after == torch_threads_before
                and native_after <= native_before
                and native_end <= native_timed,
                f"python threads {threads_before}->{threads_after}, torch threads {torch_threads_before}->"
                f"{torch_threads_after}, native threads {native_before}->{native_after}"
                + (f", and {native_timed}->{native_end} while timed" if native_end != native_timed else ""),
            )
        )
        problems = list(guards.verify_integrity(snapshot))
        problems += [p for p in caller_changes + caller.changes(caller_state) if p not in problems]
        checks.append(
            _check(
                "harness_integrity",
                not problems,
                "; ".join(problems)[:800] if problems else "timers, comparisons and modules untouched",
            )
        )
        claims["precision"] = flags_after
        claims.update(forward)
        claims["bandwidth"] = timing.measure_write_bandwidth(device) if request.get("bandwidth") else None
        return {"ok": True, "claims": claims}

    _serve(
        chan,
        {
            "build": build,
            "calls": calls,
            "burst_prepare": burst_prepare,
            "burst_run": burst_run,
            "burst_commit": burst_commit,
            "checkpoint": checkpoint,
            "kernels": kernels,
            "reveal": reveal,
            "drop": drop,
            "reserve": reserve,
            "finish": finish,
        },
    )


# ---------------------------------------------------------------------------------------------
# baselines
# ---------------------------------------------------------------------------------------------


# The compiled baselines: torch.compile's default mode (the paper's baseline), max-autotune
# without CUDA graphs (the strongest compiler setting a kernel can be held against call by call),
# and on CUDA a CUDA-graph replay of the same (reduce-overhead: what launch-bound code gets).
COMPILED_SIDES = {"compile": "default", "autotune": "max-autotune-no-cudagraphs", "graphs": "reduce-overhead"}


def _compiled(side: str, model: Any) -> Any:
    compiled = torch.compile(model, mode=COMPILED_SIDES[side])
    if side != "graphs":
        return compiled

    def replay(*args: Any) -> Any:
        # Each call is a new step for the CUDA-graph trees: the previous call's outputs were
        # read (fingerprinted) before this one starts.
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(*args)

    return replay


def _dynamo_graphs() -> int:
    try:
        from torch._dynamo.utils import counters

        return int(sum(counters["stats"].values())) + int(sum(counters["recompiles"].values()))
    except Exception:
        return 0


class Baselines:
    """Eager and torch.compile on the pristine reference, timed exactly like the candidate.

    One object serves one evaluation (`serve_baselines`) or, kept by the harness's worker, every
    evaluation of a session on the same reference (`serve_baselines_service`): the compiled
    model is built and warmed once, and each round only loads its own weights and input sets.
    """

    def __init__(self, spec: dict) -> None:
        self.device = spec["device"]
        evidence.session_device(self.device)
        self.precision = apply_precision_flags()
        if spec.get("threads"):
            torch.set_num_threads(int(spec["threads"]))
        self.ref = load_module(spec["reference"], "reference_model")
        self.caller: timing.Caller | None = None
        self.flush_bytes = int(spec.get("flush_bytes", timing.FLUSH_BYTES))
        self.sides: dict[str, Any] = {}
        self.template: Any = None  # the outputs the null side's stand-in is shaped like
        self.model: Any = None
        self.init: Any = None
        # The compiled baselines this evaluation times, besides eager (COMPILED_SIDES).
        self.compiled = [s for s in spec.get("baselines") or ["compile"] if s in COMPILED_SIDES]
        if self.device != "cuda" and "graphs" in self.compiled:
            self.compiled.remove("graphs")  # CUDA graphs exist on CUDA only
        self.errors: dict[str, str] = {}
        self.rounds = 0
        self.sets: _Sets | None = None
        self.graphs_at_start = 0
        self.work: wire.Work | None = None
        self.peaks: wire.Peaks | None = spec.get("peaks")
        self._burst: list[Any] = []  # a null burst's inputs, between its two requests
        self._burst_ops = 0  # and the ops its stand-in dispatches (the candidate's stand-in's)

    @property
    def compile_error(self) -> str | None:
        return self.errors.get("compile")

    def _compile_sides(self, model: Any) -> None:
        """Eager, and each compiled baseline that torch.compile can make of `model`."""
        self.sides = {"eager": model}
        self.errors = {}
        for side in self.compiled:
            try:
                self.sides[side] = _compiled(side, model)
            except Exception as exc:  # no C++ compiler for inductor, an op it cannot trace, ...
                self.errors[side] = trim_exception(exc, 600)

    def _warm_sides(self, inputs_for: Any, most: int) -> None:
        """Warm every compiled side; one that fails to compile or run is dropped, with why."""
        for side in [s for s in self.compiled if s in self.sides]:
            try:
                self._warm(side, inputs_for, most)
            except Exception as exc:
                self.sides.pop(side)
                self.errors[side] = trim_exception(exc, 600)

    def _measure(self) -> None:
        """The reference's work on this round's first set (once per model and shapes) and, once
        per process where the spec did not bring them, the machine's peaks."""
        assert self.sets is not None
        try:
            if self.work is None:
                self.work = roofline.reference_work(self.model, self.sets.device_inputs(0))
            if self.peaks is None:
                self.peaks = roofline.machine_peaks(self.device)
        except Exception as exc:  # the roofline is for the record; the round goes on without it
            print(f"baselines: roofline not measured: {trim_exception(exc, 400)}", file=sys.stderr, flush=True)

    def _reuse(self, payload: dict) -> bool:
        """Give the model already built (and compiled) this round's reference weights in place;
        False when it was made from other init arguments or its weights do not fit."""
        if not isinstance(self.model, torch.nn.Module) or not _same_values(self.init, payload["init"]):
            return False
        state = payload["state"]
        if not _weights_fit(self.model.state_dict(), state):
            return False
        if state:
            self.model.load_state_dict(state)
        return True

    def start_round(self, spec: dict) -> dict:
        start = _clock()
        self.sets = _Sets(Path(spec["inputs_dir"]), self.device)
        payload = self.sets.payload(0)
        fresh = not self._reuse(payload)
        if fresh:
            self.model, _ = build_model(self.ref.Model, payload, self.device, int(spec["seeds"][0]))
            self.init = payload["init"]
        self._start_device()
        assert self.caller is not None
        self.caller.plan = spec.get("plan")  # this round's draws, the same as the candidate's
        if fresh:
            self._compile_sides(self.model)
            self.work = None
        warm_sets = [int(k) for k in spec["timed_sets"]]
        sets = self.sets
        self._warm_sides(lambda i: sets.device_inputs(warm_sets[i % len(warm_sets)]), 40 if fresh else 4)
        self._measure()
        self.rounds += 1
        self.template = None
        self.graphs_at_start = _dynamo_graphs()
        return {
            "ok": True,
            "sides": sorted(self.sides) + ["null"],
            "prepare_s": round(_clock() - start, 4),
            "rounds": self.rounds,
            "reused": not fresh,
        }

    def prewarm(self) -> None:
        """Build and warm both sides on inputs the reference makes itself (seed 0), before any
        round's input sets exist; a round then only loads its own weights and inputs."""
        import random

        ref = self.ref
        random.seed(0)
        torch.manual_seed(0)
        init = list(ref.get_init_inputs()) if callable(getattr(ref, "get_init_inputs", None)) else []
        random.seed(0)
        torch.manual_seed(0)
        model = ref.Model(*init)
        random.seed(1)
        torch.manual_seed(1)
        inputs = to_device(list(ref.get_inputs()), self.device)
        if isinstance(model, torch.nn.Module):
            model = model.to(self.device)
        self.model, self.init = model, to_device(init, "cpu")
        self._start_device()
        self._compile_sides(model)
        self._warm_sides(lambda i: inputs, 40)

    def _start_device(self) -> None:
        if self.caller is None:
            if self.device == "cuda":
                warm_up_cuda()
            self.caller = timing.Caller(self.device, self.flush_bytes)

    def _warm(self, side: str, inputs_for: Any, most: int) -> None:
        """Call a compiled side on `inputs_for(i)` until steady: a first call compiles (and
        max-autotune tries its choices), later ones may still specialize; the window starts once
        the last few calls agree and no new graph was made."""
        assert self.caller is not None
        recent: list[float] = []
        for i in range(most):
            before = _dynamo_graphs()
            _, _, us, _ = self.caller.call(self.sides[side], inputs_for(i), 10_000 + i)
            recent = (recent + [us])[-4:]
            if i >= 3 and _dynamo_graphs() == before and max(recent) <= 1.15 * min(recent):
                break

    def calls(self, request: dict) -> dict:
        assert self.caller is not None and self.sets is not None
        side = request.get("side")
        # "null": the candidate's null blocks made here, in a process no candidate code ever
        # ran in (the same stand-in, op guard and evidence): what the harness's work around a
        # call costs, against which the candidate process's own null blocks are believed.
        null = side == "null"
        fn = self.sides.get("eager") if null else self.sides.get(side)
        if fn is None:
            return {"ok": False, "error": f"no baseline named {side!r}"}
        events, walls, fps, proofs, leads, flushes = [], [], [], [], [], []
        try:
            for c in request["calls"]:
                args = self.caller.prepare(self.sets.device_inputs(int(c["set"])))
                if null:
                    out, event_us, wall_us = self.caller.run(
                        _stand_in(self._null_template(args)), args, int(c["seed"]), guards.StrictOpGuard("strict")
                    )
                else:
                    out, event_us, wall_us = self.caller.run(fn, args, int(c["seed"]))
                # What the candidate's process does after each call, and a reply of the same
                # size, so both sides pay the same for everything around the call.
                proofs.append(evidence.call_evidence(args, out))
                fps.append(evidence.fingerprint(list(out) if isinstance(out, (tuple, list)) else [out]))
                device_sync(self.device)
                events.append(event_us)
                walls.append(wall_us)
                if self.caller.lead_us is not None:
                    leads.append(self.caller.lead_us)
                if self.caller.flush_us is not None:
                    flushes.append(self.caller.flush_us)
                del out, args
        except Exception as exc:
            return {"ok": False, "error": trim_exception(exc, 600)}
        reply = {
            "ok": True,
            "events_us": events,
            "walls_us": walls,
            "fingerprints": fps,
            "evidence": proofs,
            "leads_us": leads,
            "flushes_us": flushes,
        }
        # Above 1: something else used the device's SMs or memory, or its clock was lowered,
        # while this block ran (the controller makes such a block again).
        ratio = timing.device_ratio(self.caller, leads, flushes)
        if ratio is not None:
            reply["device_ratio"] = ratio
        return reply

    def _null_template(self, args: list[Any]) -> Any:
        """The outputs the null calls' stand-in is shaped like: eager's on the first null call."""
        if self.template is None:
            with torch.no_grad():
                self.template = self.sides["eager"](*args)
        return self.template

    def burst_sizes(self, request: dict) -> dict:
        """What one burst call holds on the device: the largest timed input set and the outputs
        (bytes), measured here where no candidate code runs, so no candidate can size its bursts."""
        assert self.sets is not None
        sets = [int(k) for k in request.get("sets") or []]
        inputs = max((_output_bytes(timing.tensor_leaves(self.sets.device_inputs(k))) for k in sets), default=0)
        first = self.sets.device_inputs(sets[0]) if sets else []
        return {"ok": True, "input_bytes": inputs, "output_bytes": _output_bytes(self._null_template(first))}

    def burst_prepare(self, request: dict) -> dict:
        assert self.caller is not None and self.sets is not None
        self._burst_ops = int(request.get("ops") or 0)
        try:
            self._burst = [
                self.caller.burst_inputs(self.sets.device_inputs(int(c["set"])), int(c["seed"]))
                for c in request["calls"]
            ]
            device_sync(self.device)
        except Exception as exc:
            return {"ok": False, "error": trim_exception(exc, 600)}
        return {"ok": True}

    def burst_run(self, request: dict) -> dict:
        """A null burst: the stand-in, the op guard and the synchronizes of the candidate's bursts,
        in a process no candidate code ever ran in."""
        assert self.caller is not None
        inputs, self._burst = self._burst, []
        try:
            stand_in = _stand_in(self._null_template(inputs[0]), self._burst_ops) if inputs else None
            if stand_in is not None:
                self.caller.burst(stand_in, inputs, lambda: guards.StrictOpGuard("strict"), null=True)
        except Exception as exc:
            return {"ok": False, "error": trim_exception(exc, 600)}
        return {"ok": True}

    def handlers(self) -> dict[str, Any]:
        """What a round's controller may ask, by op."""
        return {
            "calls": self.calls,
            "burst_sizes": self.burst_sizes,
            "burst_prepare": self.burst_prepare,
            "burst_run": self.burst_run,
            "finish": self.finish,
        }

    def finish(self, request: dict) -> dict:
        info: wire.BaselinesInfo = {
            "precision": self.precision,
            "recompiles_in_window": _dynamo_graphs() - self.graphs_at_start,
            "rounds": self.rounds,
        }
        if self.compile_error:
            info["compile_error"] = self.compile_error
        if self.errors:
            info["baseline_errors"] = dict(self.errors)
        if self.work is not None:
            info["work"] = self.work
        if self.peaks is not None:
            info["peaks"] = self.peaks
        self.sets = None  # this round's inputs are not needed again
        if self.device == "cuda":
            torch.cuda.empty_cache()  # a kept process must not sit on memory the next candidate needs
        return {"ok": True, "info": info}


def _same_values(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(torch.equal(a, b))
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b))
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def serve_baselines(spec: dict, chan: channel.Channel) -> None:
    """The baselines of one evaluation, in a process of its own."""
    baselines = Baselines(spec)
    chan.send(baselines.start_round(spec))
    _serve(chan, baselines.handlers())


def serve_baselines_service(spec: dict, chan: channel.Channel) -> None:
    """The baselines of every evaluation of one reference, kept warm between them.

    Each evaluation's controller opens a round with its own nonce and reads replies until the
    one that carries it: whatever an earlier, interrupted evaluation left in the channel is
    skipped. A request out of turn is answered with an error and changes nothing.
    """
    baselines: Baselines | None = None
    active = False
    while True:
        try:
            request = chan.recv()
        except channel.ChannelClosed:
            return
        op = request.get("op")
        if op == "prewarm":  # from the worker, unanswered: nothing waits for it
            try:
                if baselines is None:
                    baselines = Baselines(request["spec"])
                    baselines.prewarm()
            except Exception as exc:  # the round then builds them itself; the log says why
                print(f"baselines service: prewarm failed: {trim_exception(exc, 2000)}", file=sys.stderr, flush=True)
                baselines = None
            continue
        if op == "round":
            try:
                if baselines is None:
                    baselines = Baselines(request["spec"])
                reply = baselines.start_round(request["spec"])
                active = True
            except Exception as exc:
                reply, active = {"ok": False, "error": trim_exception(exc, 600)}, False
            chan.send({**reply, "nonce": request.get("nonce")})
        elif active and baselines is not None and op in baselines.handlers():
            chan.send(baselines.handlers()[op](request))
            active = op != "finish"
        else:
            chan.send({"ok": False, "error": f"request {op!r} out of turn"})
