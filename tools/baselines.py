"""Locked: the baselines' process, eager and torch.compile on the pristine reference, timed
exactly like the candidate (docs/security.md, "The trust boundary").

`serve_baselines` serves one evaluation in a process the controller forks; kept by the harness's
worker, `serve_baselines_service` serves every evaluation of one reference, so torch.compile is
built and warmed once per session, not once per round. The same `timing.Caller` makes its calls,
and it makes the null blocks and null bursts that the candidate's own are believed up to, in a
process no candidate code ever ran in. No candidate code runs here; what it replies is the
harness's own measure.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

import channel
import evidence
import op_guard
import roofline
import timing
import torch
import wire
from input_sets import InputSets, build_model, weights_fit
from serving import output_bytes, serve, stand_in, warm_up_cuda
from worker_common import apply_precision_flags, device_sync, load_module, to_device, trim_exception

_clock = time.perf_counter

# The compiled baselines: torch.compile's default mode (the paper's baseline), max-autotune
# without CUDA graphs (the strongest compiler setting a kernel can be held against call by call),
# and on CUDA a CUDA-graph replay of the same (reduce-overhead: what launch-bound code gets).
COMPILED_SIDES = {"compile": "default", "autotune": "max-autotune-no-cudagraphs", "graphs": "reduce-overhead"}


def _compiled(side: str, model: Any) -> Any:
    compiled: Callable[..., Any] = torch.compile(model, mode=COMPILED_SIDES[side])
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

    def __init__(self, spec: wire.BaselinesSpec) -> None:
        self.device = spec["device"]
        evidence.session_device(self.device)
        self.precision = apply_precision_flags(spec.get("precision", "dtype"))
        threads = spec.get("threads")
        if threads:
            torch.set_num_threads(int(threads))
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
        self.sets: InputSets | None = None
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

    def _reuse(self, payload: dict[str, Any]) -> bool:
        """Give the model already built (and compiled) this round's reference weights in place;
        False when it was made from other init arguments or its weights do not fit."""
        if not isinstance(self.model, torch.nn.Module) or not _same_values(self.init, payload["init"]):
            return False
        state = payload["state"]
        if not weights_fit(self.model.state_dict(), state):
            return False
        if state:
            self.model.load_state_dict(state)
        return True

    def start_round(self, spec: wire.BaselinesRound) -> dict[str, Any]:
        start = _clock()
        self.sets = InputSets(Path(spec["inputs_dir"]), self.device)
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

    def calls(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.caller is not None and self.sets is not None
        side = request.get("side")
        # "null": the candidate's null blocks made here, in a process no candidate code ever
        # ran in (the same stand-in, op guard and evidence): what the harness's work around a
        # call costs, against which the candidate process's own null blocks are believed.
        null = side == "null"
        fn = self.sides.get("eager") if null else self.sides.get(side) if isinstance(side, str) else None
        if fn is None:
            return {"ok": False, "error": f"no baseline named {side!r}"}
        events, walls, fps, proofs, leads, flushes = [], [], [], [], [], []
        try:
            for c in request["calls"]:
                args = self.caller.prepare(self.sets.device_inputs(int(c["set"])))
                if null:
                    out, event_us, wall_us = self.caller.run(
                        stand_in(self._null_template(args)), args, int(c["seed"]), op_guard.StrictOpGuard("strict")
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

    def burst_sizes(self, request: dict[str, Any]) -> dict[str, Any]:
        """What one burst call holds on the device: the largest timed input set and the outputs
        (bytes), measured here where no candidate code runs, so no candidate can size its bursts."""
        assert self.sets is not None
        sets = [int(k) for k in request.get("sets") or []]
        inputs = max((output_bytes(timing.tensor_leaves(self.sets.device_inputs(k))) for k in sets), default=0)
        first = self.sets.device_inputs(sets[0]) if sets else []
        return {"ok": True, "input_bytes": inputs, "output_bytes": output_bytes(self._null_template(first))}

    def burst_prepare(self, request: dict[str, Any]) -> dict[str, Any]:
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

    def burst_run(self, request: dict[str, Any]) -> dict[str, Any]:
        """A null burst: the stand-in, the op guard and the synchronizes of the candidate's bursts,
        in a process no candidate code ever ran in."""
        assert self.caller is not None
        inputs, self._burst = self._burst, []
        try:
            null_fn = stand_in(self._null_template(inputs[0]), self._burst_ops) if inputs else None
            if null_fn is not None:
                self.caller.burst(null_fn, inputs, lambda: op_guard.StrictOpGuard("strict"), null=True)
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

    def finish(self, request: dict[str, Any]) -> dict[str, Any]:
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


def serve_baselines(spec: wire.EvaluateRequest, chan: channel.Channel) -> None:
    """The baselines of one evaluation, in a process of its own."""
    baselines = Baselines(spec)
    chan.send(baselines.start_round(spec))
    serve(chan, baselines.handlers())


def serve_baselines_service(chan: channel.Channel) -> None:
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
