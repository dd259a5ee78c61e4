"""The requests the harness sends its locked jobs, built from what a Harness knows.

Each request is one typed dict of tools/wire.py, written to the job's spec file by
`WorkerPool.submit` (harness/pool.py) and read by the job as that type says; the worker runs the
job the request names by `wire.JOBS`. Nothing here runs a job or reads a file but the
reference whose digest keys the baselines service.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal, Mapping, Sequence, cast

from cuda_agent_cli.harness import wire


def compile_request(
    device: str, build_dir: Path, binding_dir: Path | None, kernels_dir: Path | None, objects_dir: Path, pch_dir: Path
) -> wire.CompileRequest:
    """The workspace's extension, built with ninja (tools/compile_kernels.py)."""
    return {
        "device": device,
        "build_dir": str(build_dir),
        "binding_dir": str(binding_dir),
        "kernels_dir": str(kernels_dir),
        # Objects by content, shared by every session of this user: binding.cpp and any
        # unchanged kernel are linked, not compiled again.
        "objects_dir": str(objects_dir),
        "pch_dir": str(pch_dir),
    }


def inline_build_request(
    device: str, candidate: Path, extensions_dir: Path, out_dir: Path, confine_writes: bool
) -> wire.InlineBuildRequest:
    """A single-file candidate's import alone, which builds its load_inline extension into
    `extensions_dir` (tools/inline_build.py)."""
    return {
        "device": device,
        "candidate": str(candidate),
        "extensions_dir": str(extensions_dir),
        "out_dir": str(out_dir),
        "writable": [],
        "confine_writes": confine_writes,
    }


def pch_request(device: str, pch_dir: str) -> wire.PchRequest:
    """torch/extension.h precompiled for the device's flags (tools/compile_kernels.py)."""
    return {"device": device, "pch_dir": pch_dir}


def service_key(
    reference: Path, device: str, threads: int | None, baselines: Sequence[str], log: Path, precision: str = "dtype"
) -> wire.ServiceRequest:
    """The worker keeps eager and torch.compile warm between the rounds of one reference:
    the key is everything the baselines' process is made from."""
    digest = hashlib.sha256(reference.read_bytes())
    digest.update(
        json.dumps([device, threads, list(baselines)] + ([precision] if precision != "dtype" else [])).encode()
    )
    return {"key": digest.hexdigest(), "log": str(log)}


def baselines_spec(
    reference: str,
    device: str,
    threads: int | None,
    baselines: Sequence[str],
    peaks: Mapping[str, object] | None,
    precision: str = "dtype",
) -> wire.BaselinesSpec:
    """What the baselines' process is made from, for a service to build and warm ahead."""
    return {
        "reference": reference,
        "device": device,
        "threads": threads,
        "baselines": list(baselines),
        "peaks": _peaks(peaks),
        "precision": precision,
    }


def _peaks(known: Mapping[str, object] | None) -> wire.Peaks | None:
    # The peaks a baselines' process measured (wire.BaselinesInfo), as the harness kept them.
    return cast("wire.Peaks | None", known)


def prewarm_request(key: wire.ServiceRequest, prewarm: wire.BaselinesSpec) -> wire.ServiceRequest:
    """A `service` job: start the service of `key` and have it build and warm the baselines now."""
    return {**key, "prewarm": prewarm}


def evaluate_request(
    *,
    device: str,
    policy: str,
    candidate: Path,
    reference: Path,
    inputs_dir: Path,
    out_dir: Path,
    n: int,
    seeds: list[int],
    timed_sets: list[int],
    extensions_dir: Path,
    writable: Path,
    confine_writes: bool,
    threads: int | None,
    checks: int,
    one_in: int,
    detect: float,
    call_timeout: float,
    go_file: Path,
    go_timeout: float,
    baselines: Sequence[str],
    peaks: Mapping[str, object] | None,
    precision: str = "dtype",
) -> wire.EvaluateRequest:
    """One round's evaluation (tools/controller.py). A profile's `timing` and every round's
    `plan` are added once the inputs jobs have answered."""
    return {
        "device": device,
        "policy": policy,
        "candidate": str(candidate),
        "reference": str(reference),
        "inputs_dir": str(inputs_dir),
        "out_dir": str(out_dir),
        "n": n,
        "seeds": seeds,
        "timed_sets": timed_sets,
        "extensions_dir": str(extensions_dir),
        "writable": [str(writable)],
        "confine_writes": confine_writes,
        "threads": threads,
        "checks": checks,
        "one_in": one_in,
        "detect": detect,
        "call_timeout": call_timeout,
        "go_file": str(go_file),
        "go_timeout": go_timeout,
        "baselines": list(baselines),
        "peaks": _peaks(peaks),
        "precision": precision,
    }


def prewarm_spec(evaluate: wire.EvaluateRequest) -> wire.BaselinesSpec:
    """The baselines an evaluation will time, for its service to build and warm ahead."""
    return baselines_spec(
        evaluate["reference"],
        evaluate["device"],
        evaluate["threads"],
        evaluate["baselines"],
        evaluate["peaks"],
        evaluate.get("precision", "dtype"),
    )


def inputs_request(evaluate: wire.EvaluateRequest, indices: list[int]) -> wire.InputsRequest:
    """The input sets `indices` of an evaluation (tools/verify_kernels.py); several jobs side by
    side each write some of them."""
    return {
        "reference": evaluate["reference"],
        "device": evaluate["device"],
        "seeds": evaluate["seeds"],
        "models": evaluate["n"],
        "indices": indices,
        "out_dir": evaluate["inputs_dir"],
    }


def timing_plan(
    trials: int, warmup: int, block: int, bursts: int, burst_bytes: int, burst_check_bytes: int
) -> wire.TimingPlan:
    """How a profile's window is timed."""
    return {
        "trials": trials,
        "warmup": warmup,
        "block": block,
        "bursts": bursts,
        "burst_bytes": burst_bytes,
        "burst_check_bytes": burst_check_bytes,
    }


def build_done(compiled: bool, module_dir: str | None) -> wire.BuildDone:
    """The go file's word to the evaluation: whether the build succeeded, and where it is."""
    return {"compiled": compiled, "module_dir": module_dir}


def judged_calls(info: wire.EvaluateResult, n: int) -> list[wire.JudgedCall]:
    """The calls the judge rebuilds and checks: the `n` verification calls, the first one made
    again (determinism, id n), those after the harness changed the weights, and the timed calls
    the controller chose."""
    calls: list[wire.JudgedCall] = []
    for c in info["verify_calls"]:
        role: Literal["verify", "again", "weights"] = (
            "weights" if "weights" in c else "again" if c["id"] == n else "verify"
        )
        calls.append({**c, "role": role})
    calls += [{**c, "role": "timed"} for c in info.get("checked_calls") or []]
    return calls


def judge_request(
    evaluate: wire.EvaluateRequest,
    calls: list[wire.JudgedCall],
    commits: dict[str, wire.Commit],
    fingerprints: list[wire.SetFingerprints],
    atol: float,
    rtol: float,
) -> wire.JudgeRequest:
    """Every output check of the revealed calls, in a process the candidate never ran in."""
    return {
        "reference": evaluate["reference"],
        "device": evaluate["device"],
        "inputs_dir": evaluate["inputs_dir"],
        "cand_dir": evaluate["out_dir"],
        "n": evaluate["n"],
        "seeds": evaluate["seeds"],
        "atol": atol,
        "rtol": rtol,
        "calls": calls,
        "commits": commits,
        "fingerprints": fingerprints,
        "plan": evaluate.get("plan"),
        "precision": evaluate.get("precision", "dtype"),
    }
