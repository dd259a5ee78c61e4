"""A bench run: suite -> jobs -> scheduler -> results.jsonl -> summary.json, report.md, report.html.

The orchestration only: loading is suite.py and solutions.py, one task is task_run.py, the
scheduling is local_pool.py (or ray_runner.py), metrics.py computes, report.py renders. Nothing
here prints; the CLI gets the events through callbacks.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cuda_agent_cli.bench import store as store_mod
from cuda_agent_cli.bench.suite import BenchTask, Suite, load_suite, parse_id_ranges
from cuda_agent_cli.config import POLICIES
from cuda_agent_cli.errors import BadInput, CudaAgentError, EnvironmentMissing
from cuda_agent_cli.harness.baselines import check_reward_baseline
from cuda_agent_cli.machine import pick_device

SUMMARY = "summary.json"


@dataclass
class BenchRequest:
    suite: str
    root: Path
    out: Path
    levels: str | None = None
    tasks: str | None = None
    solutions: Path | None = None
    model: str | None = None
    api_base: str | None = None
    max_turns: int | None = None
    max_cost: float | None = None
    timeout: float | None = None
    device: str | None = None
    policy: str = "strict"
    gpus: str | None = None
    ray: str | None = None
    rerun_failed: bool = False
    trials: int | None = None
    atol: float | None = None
    rtol: float | None = None
    allow_unsafe: bool = False
    # Compile-ahead workers of the local pool; None: default_builders() (on a GPU only).
    compile_ahead: int | None = None
    # What the reward is decided against: "paper" (eager and default torch.compile) or "best".
    reward_baseline: str = "paper"
    # What outputs are held to (tools/precision.py): the module's dtype, or kernelbench's 1e-2.
    precision: str = "dtype"
    # KernelBench's revised tasks, or the original definitions it keeps as N_Name_OLD.py.
    task_version: str = "current"


@dataclass
class BenchPlan:
    request: BenchRequest
    suite: Suite
    device: str
    jobs: list[dict[str, Any]]
    skipped: list[str]
    store: store_mod.ResultStore
    settings: dict[str, Any]
    slots: list[str | None] = field(default_factory=list)


def _task_json(t: BenchTask) -> dict[str, Any]:
    return {
        "key": t.key,
        "level": t.level,
        "problem_id": t.problem_id,
        "name": t.name,
        "source": t.source,
        "origin": t.origin,
        "error": t.error,
        "sha256": t.sha256,
    }


def _levels(text: str | None) -> set[int] | None:
    if text is None or not text.strip():
        return None
    return parse_id_ranges(text.replace("level", ""))


def plan_bench(req: BenchRequest) -> BenchPlan:
    """Everything checked before a single task runs: the suite, the mode, the out folder."""
    from cuda_agent_cli.bench.solutions import find_samples, samples_for, samples_sha256

    if req.solutions is None and not req.model:
        raise BadInput(
            "bench needs --model M (agent mode) or --solutions DIR (harness-only mode)",
            "e.g. --solutions runs/level1 or --model anthropic/claude-sonnet-4-5",
        )
    if req.solutions is not None and req.model:
        raise BadInput("--model and --solutions are two different modes", "pass one of them")
    if req.policy not in POLICIES:
        raise BadInput(f"unknown policy {req.policy!r}", "use --policy strict or --policy hybrid")
    check_reward_baseline(req.reward_baseline)
    from cuda_agent_cli.harness.precision import check_precision

    check_precision(req.precision)
    suite = load_suite(req.suite, req.root, _levels(req.levels), parse_id_ranges(req.tasks), req.task_version)
    device = pick_device(req.device)
    mode = "solutions" if req.solutions is not None else "agent"
    if mode == "agent":
        from cuda_agent_cli.bench.task_run import session_config
        from cuda_agent_cli.run.checks import check_limits, check_model

        # Every task's session would refuse the same limit: one line for the run instead.
        check_limits(session_config({"max_turns": req.max_turns, "max_cost": req.max_cost, "timeout": req.timeout}))
        model = req.model or ""
        if model.startswith("replay:") and Path(model.split(":", 1)[1]).expanduser().is_dir():
            pass  # a folder of per-task replays; each task checks its own file
        else:
            check_model(model, req.api_base)
    samples = find_samples(req.solutions) if req.solutions is not None else []
    out = Path(req.out).expanduser().absolute()
    from cuda_agent_cli.preflight import cannot_create

    problem = cannot_create(out)
    if problem:
        raise BadInput(
            f"--out {req.out} cannot take the results: {problem}",
            "give --out a folder (new, or one an earlier run of this suite wrote) for results.jsonl and the reports",
        )
    store = store_mod.ResultStore(out)
    settings = {
        "mode": mode,
        "device": device,
        "policy": req.policy,
        "reward_baseline": req.reward_baseline,
        "precision": req.precision,
        "model": req.model,
        "solutions": str(Path(req.solutions).absolute()) if req.solutions else None,
        "trials": req.trials,
        "max_turns": req.max_turns,
        "max_cost": req.max_cost,
    }
    store.claim(suite.identity, settings)
    done = store.load()
    jobs, skipped = [], []
    for t in suite.tasks:
        mine = samples_for(t, samples) if mode == "solutions" else []
        sol_sha = samples_sha256(mine) if mode == "solutions" else None
        if store_mod.to_skip(done, t.key, t.sha256, sol_sha, req.rerun_failed):
            skipped.append(t.key)
            continue
        jobs.append(
            {
                "task": _task_json(t),
                "mode": mode,
                "samples": [s.to_json() for s in mine],
                "solutions_sha256": sol_sha,
                "work": str(out / "work" / t.key),
                "sessions": str(out / "agent"),
                "device": device,
                "policy": req.policy,
                "reward_baseline": req.reward_baseline,
                "precision": req.precision,
                "trials": req.trials,
                "atol": req.atol,
                "rtol": req.rtol,
                "model": req.model,
                "api_base": req.api_base,
                "max_turns": req.max_turns,
                "max_cost": req.max_cost,
                "timeout": req.timeout,
                "allow_unsafe": req.allow_unsafe,
            }
        )
    return BenchPlan(req, suite, device, jobs, skipped, store, settings)


@dataclass
class BenchOutcome:
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    out: Path
    interrupted: bool = False


def make_scheduler(plan: BenchPlan) -> Any:
    if plan.request.ray:
        from cuda_agent_cli.bench.ray_runner import RayPool

        return RayPool(plan.request.ray)
    from cuda_agent_cli.bench.local_pool import LocalPool, default_builders, parse_gpus

    plan.slots = parse_gpus(plan.request.gpus, plan.device)
    builders = plan.request.compile_ahead
    if builders is None:
        builders = default_builders(plan.device, len(plan.slots), plan.jobs)
    # A cuda harness starts only with a GPU in view, even to build: the builders see the first
    # slot's GPU (they never time on it); on the CPU they see none.
    build_gpu = next((g for g in plan.slots if g is not None), "")
    return LocalPool(plan.slots, plan.store.out / "logs", builders=builders, build_gpu=build_gpu)


def finish(plan: BenchPlan, interrupted: bool = False, cpu_before: tuple[float, float] | None = None) -> BenchOutcome:
    """summary.json, report.md and report.html over every finished task of the selection.
    `cpu_before`: the machine's CPU times when the run started (timeline.cpu_times)."""
    from cuda_agent_cli.bench.metrics import baselines_timed, summarize
    from cuda_agent_cli.bench.report import write_reports
    from cuda_agent_cli.bench.timeline import busy_fraction, cpu_times, cpu_utilization

    records = store_mod.latest(plan.store.load(), [t.key for t in plan.suite.tasks])
    summary = summarize(records)
    busy = busy_fraction(records)
    summary.update(
        suite=plan.suite.identity,
        settings=plan.settings,
        finished=len(records),
        selected=len(plan.suite.tasks),
        interrupted=interrupted,
        baselines=baselines_timed(records),
        utilization={
            # The share of the run's wall time each device spent timing (its scoring rounds).
            "device_timing_share": busy["devices"],
            "device_timing_share_overall": busy["overall"],
            "wall_s": busy["wall_s"],
            # The share of every core's time the machine was busy (this run's builds and
            # timings, and whatever else ran beside them).
            "cpu": cpu_utilization(cpu_before, cpu_times()),
        },
    )
    out = plan.store.out
    tmp = out / (SUMMARY + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2, sort_keys=True))
    os.replace(tmp, out / SUMMARY)
    write_reports(out, summary, records)
    return BenchOutcome(records, summary, out, interrupted)


def run_bench(
    plan: BenchPlan, on_record: Callable[[dict[str, Any], dict[str, Any]], None] | None = None, scheduler: Any = None
) -> BenchOutcome:
    """Run the plan's jobs; each record is appended to results.jsonl the moment it arrives.
    Ctrl-C stops the run with every finished record kept, the reports written, and re-raised."""
    fatal: dict[str, Any] = {}

    def record_one(job: dict[str, Any], record: dict[str, Any]) -> None:
        if "fatal" in record:
            fatal.update(record["fatal"])
            return
        plan.store.append(record)
        if on_record:
            on_record(job, record)

    from cuda_agent_cli.bench.timeline import cpu_times

    cpu_before = cpu_times()
    scheduler = scheduler or make_scheduler(plan)
    try:
        if plan.jobs:
            scheduler.run_jobs(plan.jobs, record_one)
    except KeyboardInterrupt:
        finish(plan, interrupted=True, cpu_before=cpu_before)
        raise
    if fatal:
        finish(plan, cpu_before=cpu_before)
        raise (
            EnvironmentMissing(fatal.get("message") or "the environment is missing something", None)
            if fatal.get("exit") == 3
            else CudaAgentError(fatal.get("message") or "a task could not run")
        )
    return finish(plan, cpu_before=cpu_before)
