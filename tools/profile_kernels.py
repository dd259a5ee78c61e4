"""Locked: the eager and torch.compile baselines, timed exactly like the candidate.

Both baselines run the pristine reference on the seed-0 inputs and weights written by the inputs
job, on the same device, with the same precision flags and the same timing loop (timing.py).
With a `go_file` in the spec the job prepares first (torch.compile's build included) and starts
timing only once that file exists: the harness overlaps the preparation with its own build.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

import timing
from verify_kernels import _build_model, _load
from worker_common import apply_precision_flags, load_module, to_device, trim_exception


def run_baselines_job(spec: dict) -> dict:
    device = spec["device"]
    precision = apply_precision_flags()
    ref = load_module(spec["reference"], "reference_model")
    in_dir = Path(spec["inputs_dir"])
    payload = _load(in_dir / "inputs_0.pt")
    model, _ = _build_model(ref.Model, payload, device, spec["seed"])
    # Timed exactly like the candidate: rotating input sets, fresh scaled copies per call.
    input_sets = [to_device(_load(in_dir / f"inputs_{k}.pt")["inputs"], device) for k in range(int(spec["n"]))]
    order, scales = spec.get("order"), spec.get("scales")
    trials, warmup = int(spec["trials"]), int(spec["warmup"])
    flush = int(spec.get("flush_bytes", timing.FLUSH_BYTES))
    result: dict[str, Any] = {"precision": precision}
    compiled = compile_error = None
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*input_sets[0])  # compile outside the timed loop
    except Exception as exc:  # no C++ compiler for inductor, an op it cannot trace, ...
        compile_error = trim_exception(exc, 600)
    if spec.get("go_file"):
        _wait_for(Path(spec["go_file"]))
    eager = timing.time_calls(model, input_sets, device, trials, warmup, flush, order=order, scales=scales)
    eager.pop("saved")
    result["eager"] = eager
    if compiled is not None:
        try:
            measured = timing.time_calls(compiled, input_sets, device, trials, warmup, flush, order=order,
                                         scales=scales)
            measured.pop("saved")
            result["compile"] = measured
        except Exception as exc:  # e.g. a recompile for another input set that fails
            compile_error = trim_exception(exc, 600)
    if compile_error is not None:
        result["compile_error"] = compile_error
    return result


def _wait_for(go: Path) -> None:
    """Prepared (models built, torch.compile done) while the harness builds the candidate; the
    timing waits for its word, so nothing else runs on the machine while the clock does."""
    delay = 0.001
    while not go.exists():
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
