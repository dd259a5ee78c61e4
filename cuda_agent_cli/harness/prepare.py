"""A round's preparation: the build, the input sets and the warm baselines, side by side.

The extension builds while the inputs jobs write the round's sets from the pristine reference
and, on a profile, the baselines' service warms eager and torch.compile; the evaluation is
submitted as soon as the sets exist, and its candidate process starts once the build is done
(the go file). Where the reference's draws must keep a structural leaf as it is (no rule it takes
could draw it anew: tools/draws.py), the timed calls get more sets of their own, so no value of
it repeats across many timed calls.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Callable, cast

from cuda_agent_cli.errors import WorkspaceError
from cuda_agent_cli.harness import jobs, wire
from cuda_agent_cli.harness.build import Builder
from cuda_agent_cli.harness.pool import JobOutcome, Ticket, WorkerPool
from cuda_agent_cli.harness_result import HarnessResult

# CPU priority of the inputs job, which runs beside a build and times nothing.
_BESIDE_BUILD = 10
# Timed sets added where the reference's draws keep a structural leaf as it is.
MORE_TIMED_SETS = 6


def build_and_prepare(
    result: HarnessResult,
    run_dir: Path,
    spec: wire.EvaluateRequest,
    *,
    pool: WorkerPool,
    builder: Builder,
    service: wire.ServiceRequest,
    timing_plan: Callable[[int], wire.TimingPlan],
    inputs_timeout: float,
    evaluate_timeout: float,
    reference: Path,
) -> tuple[Ticket | None, wire.InputsResult]:
    """Build the extension while the inputs are made and (profile) the baselines prepare;
    returns the submitted evaluation (None: nothing to evaluate) and the input sets made."""
    timed = bool(spec["timed_sets"])
    # The build is submitted first: a fresh worker finishes its own warm-up beside it.
    compiling = builder.submit(result, run_dir)
    # The warm baselines get going at once (a no-op when they are warm already).
    prewarm = (
        pool.submit(
            "service",
            {},
            run_dir / "service",
            60,
            service=jobs.prewarm_request(service, jobs.prewarm_spec(spec)),
        )
        if timed
        else None
    )
    # The sets are written by several jobs side by side (two on a small machine, up to one a
    # set on a large one): on a warm round making them is a long pole.
    n_sets = len(spec["seeds"])
    writers = max(2, min(n_sets, (os.cpu_count() or 2) // 2))
    halves = [list(range(k, n_sets, writers)) for k in range(writers)]
    tickets = [
        pool.submit(
            "inputs",
            jobs.inputs_request(spec, part),
            run_dir / f"inputs{k}",
            inputs_timeout,
            nice=_BESIDE_BUILD if compiling else 0,
        )
        for k, part in enumerate(halves)
        if part
    ]
    evaluating: Ticket | None = None
    go = Path(spec["go_file"])
    module_dir = None
    try:
        if prewarm is not None:
            pool.wait(prewarm)
        inputs = _merge_inputs([pool.wait(t) for t in tickets])
        result.phase_seconds["inputs.job"] = inputs.seconds
        if not inputs.ok:
            raise WorkspaceError(
                f"the reference {reference} could not produce inputs: {inputs.describe_failure()}",
                "fix model.py so Model(*get_init_inputs())(*get_inputs()) runs",
            )
        answer = inputs.result or {}
        if "error" in answer:
            raise WorkspaceError(
                answer["error"],
                "a reference needs class Model, get_inputs() and optionally get_init_inputs()",
            )
        made = cast("wire.InputsResult", answer)
        if timed and made.get("kept"):
            made = _more_timed_sets(result, run_dir, spec, made, pool, inputs_timeout)
        if timed:
            spec["timing"] = timing_plan(int(made.get("input_bytes", 0)))
        # How every call draws each input leaf anew, tried on the reference by the inputs job.
        spec["plan"] = made.get("plan")
        # Submitted now: on a profile the baselines (torch.compile included) prepare while the
        # extension still builds; the candidate's process starts only once `go` exists.
        evaluating = pool.submit(
            "evaluate",
            spec,
            run_dir / "evaluate",
            evaluate_timeout,
            service=service if timed else None,
        )
        module_dir = builder.collect(result, compiling)
        compiling = None
    finally:
        if compiling is not None:
            pool.wait(compiling[0])
        tmp = go.with_suffix(".tmp")
        tmp.write_text(json.dumps(jobs.build_done(bool(result.compiled), module_dir)))
        os.replace(tmp, go)
    if not result.compiled:
        pool.wait(evaluating)
        return None, made
    return evaluating, made


def _more_timed_sets(
    result: HarnessResult,
    run_dir: Path,
    spec: wire.EvaluateRequest,
    made: wire.InputsResult,
    pool: WorkerPool,
    timeout: float,
) -> wire.InputsResult:
    """More sets for the timed calls, each drawn by get_inputs() with a seed of its own, where the
    draws keep a leaf (a structure no rule the reference takes could redraw): with a handful of
    sets, a cache keyed on that leaf would hit on most timed calls."""
    start = len(spec["seeds"])
    spec["seeds"] = spec["seeds"] + [secrets.randbelow(2**31 - 2) for _ in range(MORE_TIMED_SETS)]
    indices = list(range(start, start + MORE_TIMED_SETS))
    spec["timed_sets"] = spec["timed_sets"] + indices
    outcome = pool.wait(pool.submit("inputs", jobs.inputs_request(spec, indices), run_dir / "inputs-more", timeout))
    more = outcome.result or {}
    if not outcome.ok or "error" in more:
        raise WorkspaceError(
            f"the reference could not produce more input sets: {more.get('error') or outcome.describe_failure()}",
            "fix model.py so Model(*get_init_inputs())(*get_inputs()) runs",
        )
    kept = ", ".join(made.get("kept") or [])
    result.warnings.append(
        f"inputs: the reference needs {kept} as get_inputs() makes it, so every timed call draws from "
        f"{len(spec['timed_sets'])} sets of its own"
    )
    return {**made, "fingerprints": list(made["fingerprints"]) + list(more.get("fingerprints") or [])}


def _merge_inputs(outcomes: list[JobOutcome]) -> JobOutcome:
    """One outcome for the inputs jobs of an evaluation: the first failure, or every set's
    fingerprints in set order (set 0's description and size)."""
    for outcome in outcomes:
        if not outcome.ok or "error" in (outcome.result or {}):
            return outcome
    fingerprints: dict[int, Any] = {}
    first = outcomes[0].result or {}
    for outcome in outcomes:
        res = outcome.result or {}
        fingerprints.update(zip(res.get("indices", []), res.get("fingerprints", [])))
        if 0 in res.get("indices", []):
            first = res
    merged = {**first, "fingerprints": [fingerprints[i] for i in sorted(fingerprints)], "n": len(fingerprints)}
    return JobOutcome("inputs", "ok", merged, seconds=max(o.seconds for o in outcomes))
