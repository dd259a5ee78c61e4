"""Locked: the candidate's process, the one process where candidate code runs.

Before anything of the candidate is loaded (the extension's own initializers included) it
confines its writes, pins the precision flags and takes every snapshot (integrity, threads);
then it imports the extension and model_new.py and answers the controller's requests: build the
models, make calls, reveal kept outputs, finish. Every call, checked or timed, goes through the
same `timing.Caller.call` under the same strict op guard, with inputs made from a seed that
arrives with the request; the output is kept, and its fingerprint and evidence are sent back at
once, so the process commits to each output before anyone has chosen which outputs will be
looked at.

Nothing here decides a verdict or a time: replies are claims, and the controller and the judge
check them.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import channel
import evidence
import integrity
import module_state
import op_guard
import output_checks
import process_filter
import tensor_files
import timing
import torch
import wire
from confinement import confine_writes
from extension_meter import ExtensionMeter, hook_extension_builders
from input_sets import InputSets, build_model
from serving import Handler, output_bytes, serve, stand_in, warm_up_cuda
from worker_common import apply_precision_flags, device_sync, load_module, python_threads, trim_exception

_clock = time.perf_counter


def _check(name: str, passed: bool, detail: str) -> wire.Check:
    return {"name": name, "passed": bool(passed), "detail": detail}


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
        problem = output_checks.tensor_problem(t)
        if problem:
            return f"output {problem}"
    return None


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


@dataclass
class Before:
    """What this process looked like before any candidate code ran, compared when it finishes."""

    flags: dict[str, Any]  # the precision flags as the harness set them
    threads: int  # Python's threads
    torch_threads: int
    native: int  # every thread, native ones too (integrity.thread_baseline)
    snapshot: integrity.IntegritySnapshot
    caller: list[tuple[Any, ...]]  # the caller's state (timing.Caller.state)


def _before_candidate_code(
    spec: wire.EvaluateRequest, claims: wire.Claims
) -> tuple[ExtensionMeter, timing.Caller, Before]:
    """Everything that must happen before any candidate code (the extension's own initializers
    included) runs: confinement, the precision flags, the extension's meter, every snapshot."""
    device = spec["device"]
    # Caches of its own: torch.compile's and triton's caches are what the baselines read, so
    # nothing this process writes can be loaded by them.
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        if os.environ.get(var):
            os.environ[var] = os.environ[var].rstrip("/") + "-candidate"
    if spec.get("confine_writes"):
        claims["write_confinement"] = confine_writes(spec)
    flags_before = apply_precision_flags(spec.get("precision", "dtype"))
    meter = ExtensionMeter()
    if spec.get("extensions_dir"):
        os.environ["TORCH_EXTENSIONS_DIR"] = spec["extensions_dir"]
    # load_inline's compiler inherits this: plain ASCII messages, as in the harness's own builds.
    os.environ["LC_ALL"] = "C"
    hook_extension_builders(meter)
    if device == "cuda":
        # The driver starts threads and torch.cuda rebinds some of its attributes when CUDA
        # comes up; done before the snapshots, an honest candidate is not blamed for it.
        warm_up_cuda()
    threads = spec.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
    threads_before = python_threads()
    torch_threads_before = torch.get_num_threads()
    # Native threads too: a C++ extension can start threads Python never hears of.
    native_before = integrity.thread_baseline()
    # Every snapshot before the extension is imported: what its initializers do is a change.
    snapshot = integrity.snapshot_integrity(reference_modules=("model", "reference_model"))
    caller = timing.Caller(device, int(spec.get("flush_bytes", timing.FLUSH_BYTES)), plan=spec.get("plan"))
    before = Before(flags_before, threads_before, torch_threads_before, native_before, snapshot, caller.state())
    return meter, caller, before


def _import_candidate(spec: wire.EvaluateRequest, claims: wire.Claims, meter: ExtensionMeter) -> type | wire.Check:
    """The candidate's ModelNew, with the extension it calls metered, or the failed check that
    says why there is none."""
    module_dir = spec.get("module_dir")
    if module_dir:
        # Built by the harness already: nothing the candidate runs needs a process of its own.
        claims["process_filter"] = process_filter.install()
        sys.path.insert(0, module_dir)
        try:
            import cuda_extension
        except BaseException as exc:
            return _check("import", False, f"the built extension failed to load: {trim_exception(exc, 600)}")
        meter.wrap_module(cuda_extension)
    try:
        cand = load_module(spec["candidate"], "model_new")
    except BaseException as exc:
        # The whole text: a failed build's message holds ninja's command lines (thousands of
        # characters each for nvcc) before the compiler's own `file.cu(42): error:` lines.
        text = f"{type(exc).__name__}: {exc}"
        if "Error building extension" in text or "error:" in text and "cpp_extension" in repr(type(exc)) + text:
            from compiler_errors import trim_compiler_output

            return _check("compile", False, trim_compiler_output(text, (spec.get("extensions_dir") or "",)))
        return _check("import", False, f"model_new.py failed to import: {trim_exception(exc, 800)}")
    if "process_filter" not in claims:  # a single-file candidate built its extension as it imported
        claims["process_filter"] = process_filter.install()
    cls = getattr(cand, "ModelNew", None)
    if not isinstance(cls, type):
        return _check("import", False, "model_new.py defines no class ModelNew")
    return cls


def serve_candidate(spec: wire.EvaluateRequest, chan: channel.Channel) -> None:
    evidence.session_device(spec["device"])
    claims: wire.Claims = {"checks": [], "phases": {}}
    mark = _clock()
    meter, caller, before = _before_candidate_code(spec, claims)
    cls = _import_candidate(spec, claims, meter)
    if not isinstance(cls, type):
        claims["checks"].append(cls)
        chan.send({"ok": False, "claims": claims})
        return
    claims["checks"].append(_check("import", True, "model_new.py and the extension imported"))
    claims["ext_functions"] = list(meter.wrapped)
    claims["phases"]["import"] = round(_clock() - mark, 4)
    chan.send({"ok": True})
    serve(chan, CandidateProcess(spec, cls, claims, meter, caller, before).handlers())


class CandidateProcess:
    """The candidate's process once its code is loaded: its models, the outputs it keeps and
    what its calls showed, between the controller's requests (one method per request)."""

    def __init__(
        self,
        spec: wire.EvaluateRequest,
        cls: type,
        claims: wire.Claims,
        meter: ExtensionMeter,
        caller: timing.Caller,
        before: Before,
    ) -> None:
        self.spec = spec
        self.device, self.policy = spec["device"], spec["policy"]
        self.cls = cls
        self.claims = claims
        self.checks = claims["checks"]
        self.meter = meter
        self.caller = caller
        self.before = before
        self.caller_changes: list[str] = []  # seen at the end of a block, before anything could put it back
        self.sets = InputSets(Path(spec["inputs_dir"]), self.device, objects="stand-ins")
        self.out_dir = Path(spec["out_dir"])
        self.models: dict[int, Any] = {}
        self.kept = KeptOutputs()
        self.violations: list[str] = []
        self.dispatched: list[int] = []  # ops each real call's forward ran through the op guard
        self.forward: wire.ForwardTime = {"seconds": 0.0, "ext_seconds": 0.0, "ext_calls": 0, "ext_shares": []}
        # A burst's calls between its three requests: made (inputs), run (outputs), committed.
        self.burst: dict[str, Any] = {}
        self.native: dict[str, int] = {}  # thread counts by stage (checkpoint)
        # The parameters and buffers each verification call changed, by call id (record_state).
        self.state_kept: dict[int, list[torch.Tensor]] = {}

    def handlers(self) -> dict[str, Handler]:
        """What the controller may ask, by op."""
        return {
            "build": self.build,
            "calls": self.calls,
            "burst_prepare": self.burst_prepare,
            "burst_run": self.burst_run,
            "burst_commit": self.burst_commit,
            "checkpoint": self.checkpoint,
            "kernels": self.kernels,
            "reveal": self.reveal,
            "drop": self.drop,
            "reserve": self.reserve,
            "finish": self.finish,
        }

    def build(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            for m in request["models"]:
                self.models[int(m)], self.claims["weights"] = build_model(
                    self.cls, self.sets.payload(int(m)), self.device, int(self.spec["seeds"][m])
                )
        except BaseException as exc:
            self.checks.append(_check("crash", False, f"ModelNew could not be built: {trim_exception(exc, 800)}"))
            return {"ok": False}
        return {"ok": True}

    def stand_in_ops(self) -> int:
        # As many ops as the real calls' forward dispatched through the op guard.
        return int(statistics.median(self.dispatched)) if self.dispatched else 0

    def keep_output(self, cid: int, out: Any) -> bool:
        """Keep a real call's output for the checks; False (and `output_reused`) where it is the
        memory of an output kept already."""
        earlier = self.kept.reused_by(out)
        if earlier is not None:
            self.checks.append(
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
        self.kept.keep(cid, out)
        return True

    def calls(self, request: dict[str, Any]) -> dict[str, Any]:
        # A null block makes the same calls with everything around them, but what is called is
        # the harness's own stand-in (outputs of the first verified call's shapes, never filled):
        # its time from outside is this process's own overhead per call, which no candidate code
        # runs during and which bounds the candidate's claims (harness/clock_stats.py).
        caller, meter, forward, device = self.caller, self.meter, self.forward, self.device
        null = bool(request.get("null"))
        template = self.kept.get(0)
        ops = self.stand_in_ops() if null else 0
        events, walls, fps, proofs, leads, flushes = [], [], [], [], [], []
        # The verification calls: the model's state is recorded around each (tools/module_state.py).
        record_state = bool(request.get("state")) and not null
        for c in request["calls"]:
            model = stand_in(template, ops) if null else self.models[int(c["model"])]
            if "weights" in c and not null:
                module_state.change(model, c["weights"], lambda k: self.sets.payload(k)["state"])
            state_before = module_state.fingerprints(model) if record_state else {}
            args = caller.prepare(self.sets.device_inputs(int(c["set"])))
            guard = op_guard.StrictOpGuard(self.policy)
            calls0, ext0 = meter.calls, meter.seconds
            try:
                out, event_us, wall_us = caller.run(model, args, int(c["seed"]), guard)
            except BaseException as exc:
                if guard.violations:
                    self.violations.append(guard.detail())
                self.checks.append(
                    _check("crash", False, f"ModelNew raised on call {c['id']}: {trim_exception(exc, 800)}")
                )
                return {"ok": False}
            if not null:
                if guard.violations:
                    self.violations.append(guard.detail())
                self.dispatched.append(guard.dispatched)
                forward["seconds"] += wall_us / 1e6
                forward["ext_seconds"] += meter.seconds - ext0
                forward["ext_calls"] += meter.calls - calls0
                if len(forward["ext_shares"]) < 64:
                    forward["ext_shares"].append(
                        round((meter.seconds - ext0) / (wall_us / 1e6), 4) if wall_us > 0 else 1.0
                    )
            why = _plain_outputs(out)
            if why and not null:
                self.checks.append(_check("output_type", False, f"call {c['id']}: {why}"))
                return {"ok": False}
            # Facts for the judge, taken before anything else runs: what the inputs hold now,
            # where inputs and outputs live (aliasing), and the output's own fingerprint.
            proof = evidence.call_evidence(args, out)
            fps.append(evidence.fingerprint(list(out) if isinstance(out, (tuple, list)) else [out]))
            if record_state:
                proof["state"] = self.record_state(int(c["id"]), model, state_before)
            proofs.append(proof)
            device_sync(device)
            if not null:
                if not self.keep_output(int(c["id"]), out):
                    return {"ok": False}
            events.append(event_us)
            walls.append(wall_us)
            if caller.lead_us is not None:
                leads.append(caller.lead_us)
            if caller.flush_us is not None:
                flushes.append(caller.flush_us)
            del args, out
        if not self.caller_changes:
            self.caller_changes.extend(caller.changes(self.before.caller))
        return {
            "ok": True,
            "events_us": events,
            "walls_us": walls,
            "fingerprints": fps,
            "evidence": proofs,
            "leads_us": leads,
            "flushes_us": flushes,
        }

    def record_state(self, cid: int, model: Any, before: dict[str, wire.Fingerprint]) -> wire.StateEvidence:
        """Every parameter's and buffer's fingerprint after call `cid`, and a copy of those the
        call changed, handed over with its output for the judge to compare."""
        after = module_state.fingerprints(model)
        changed = [name for name, fp in after.items() if before.get(name) != fp]
        if changed:
            own = module_state.tensors(model)
            self.state_kept[cid] = [own[name].clone() for name in changed]
        return {"after": after, "changed": changed}

    def burst_prepare(self, request: dict[str, Any]) -> dict[str, Any]:
        self.burst.clear()
        try:
            made = [
                self.caller.burst_inputs(self.sets.device_inputs(int(c["set"])), int(c["seed"]))
                for c in request["calls"]
            ]
            device_sync(self.device)
        except BaseException as exc:
            self.checks.append(
                _check("crash", False, f"a burst's inputs could not be made: {trim_exception(exc, 400)}")
            )
            return {"ok": False}
        self.burst.update(calls=list(request["calls"]), inputs=made, null=bool(request.get("null")))
        # How many ops its null calls' stand-in dispatches (as many as its real calls ran through
        # the op guard): the baselines' null bursts dispatch as many.
        return {"ok": True, "ops": self.stand_in_ops()}

    def burst_run(self, request: dict[str, Any]) -> dict[str, Any]:
        # Timed from outside, request to reply: the calls and nothing else. The reply says only
        # that they are done; what they returned is committed to by the next request.
        null = bool(self.burst.get("null"))
        fn = stand_in(self.kept.get(0), self.stand_in_ops()) if null else self.models[0]
        policy = self.policy
        try:
            outs, used = self.caller.burst(
                fn, self.burst.get("inputs") or [], lambda: op_guard.StrictOpGuard(policy), null
            )
        except BaseException as exc:
            self.checks.append(
                _check("crash", False, f"ModelNew raised in a burst of calls: {trim_exception(exc, 800)}")
            )
            return {"ok": False}
        if null:
            self.burst.clear()
            return {"ok": True}
        for guard in used:
            if guard.violations:
                self.violations.append(guard.detail())
            self.dispatched.append(guard.dispatched)
        self.burst["outputs"] = outs
        return {"ok": True}

    def burst_commit(self, request: dict[str, Any]) -> dict[str, Any]:
        fps, proofs = [], []
        for c, args, out in zip(
            self.burst.get("calls") or [], self.burst.get("inputs") or [], self.burst.get("outputs") or []
        ):
            why = _plain_outputs(out)
            if why:
                self.checks.append(_check("output_type", False, f"call {c['id']}: {why}"))
                return {"ok": False}
            proofs.append(evidence.call_evidence(args, out))
            fps.append(evidence.fingerprint(list(out) if isinstance(out, (tuple, list)) else [out]))
            if not self.keep_output(int(c["id"]), out):
                return {"ok": False}
        self.burst.clear()
        device_sync(self.device)
        return {"ok": True, "fingerprints": fps, "evidence": proofs}

    def checkpoint(self, request: dict[str, Any]) -> dict[str, Any]:
        # Counted after the verification calls and before the profiler, whose CUPTI machinery
        # starts driver threads of its own; then again right before the timed window, so a thread
        # the candidate starts while timed is seen too.
        self.native[str(request.get("stage") or "after_calls")] = integrity.native_threads()
        return {"ok": True}

    def kernels(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            names = _profiled_kernel_names(self.models[0], self.sets.device_inputs(0))
            return {"ok": True, "names": names}
        except BaseException as exc:  # a profiler that cannot start is reported, not fatal
            return {"ok": True, "error": trim_exception(exc, 300)}

    def reveal(self, request: dict[str, Any]) -> dict[str, Any]:
        items = [(self.kept.get(int(i)), self.out_dir / f"call_{int(i)}") for i in request["ids"]]
        items += [
            (self.state_kept[int(i)], self.out_dir / f"state_{int(i)}")
            for i in request["ids"]
            if int(i) in self.state_kept
        ]
        errors = tensor_files.save_many([(out, base) for out, base in items if out is not None])
        if errors:
            raise errors[0]
        return {"ok": True}

    def drop(self, request: dict[str, Any]) -> dict[str, Any]:
        for i in request["ids"]:
            self.kept.drop(int(i))
        return {"ok": True}

    def reserve(self, request: dict[str, Any]) -> dict[str, Any]:
        size = output_bytes(self.kept.get(0))
        _reserve(self.device, int(request.get("bytes", 0)), size)
        return {"ok": True, "output_bytes": size}

    def finish(self, request: dict[str, Any]) -> dict[str, Any]:
        before, checks, violations = self.before, self.checks, self.violations
        native_end = integrity.native_threads()
        native_after = self.native.get("after_calls", native_end)
        native_timed = self.native.get("before_timing", native_end)
        if self.policy == "strict" or violations:
            checks.append(
                _check(
                    "torch_ops", not violations, violations[0] if violations else "no torch compute ops ran in forward"
                )
            )
        flags_after = integrity.precision_flags()
        changed = integrity.diff_precision_flags(before.snapshot.precision, flags_after)
        checks.append(
            _check(
                "precision_flags",
                not changed,
                f"changed by the candidate: {'; '.join(changed)}"
                if changed
                else "unchanged: " + ", ".join(f"{k}={v}" for k, v in before.flags.items()),
            )
        )
        threads_after, torch_threads_after = python_threads(), torch.get_num_threads()
        checks.append(
            _check(
                "threads",
                threads_after == before.threads
                and torch_threads_after == before.torch_threads
                and native_after <= before.native
                and native_end <= native_timed,
                f"python threads {before.threads}->{threads_after}, torch threads {before.torch_threads}->"
                f"{torch_threads_after}, native threads {before.native}->{native_after}"
                + (f", and {native_timed}->{native_end} while timed" if native_end != native_timed else ""),
            )
        )
        problems = list(integrity.verify_integrity(before.snapshot))
        problems += [p for p in self.caller_changes + self.caller.changes(before.caller) if p not in problems]
        checks.append(
            _check(
                "harness_integrity",
                not problems,
                "; ".join(problems)[:800] if problems else "timers, comparisons and modules untouched",
            )
        )
        self.claims["precision"] = flags_after
        self.claims.update(self.forward)
        self.claims["bandwidth"] = timing.measure_write_bandwidth(self.device) if request.get("bandwidth") else None
        return {"ok": True, "claims": self.claims}
