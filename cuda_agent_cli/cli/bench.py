"""`cuda-agent bench`: a task suite (KernelBench, a folder, JSONL) scored by the harness, with the
paper's metrics, in agent mode (--model) or harness-only mode (--solutions)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cuda_agent_cli.cli.options import (
    ApiBaseOpt,
    DeviceOpt,
    JsonOpt,
    ModelOpt,
    PolicyOpt,
    PrecisionOpt,
    RewardBaselineOpt,
    TrialsOpt,
    UnsafeOpt,
)

SuiteOpt = Annotated[
    str,
    typer.Option(
        "--suite", help="kernelbench (a checkout as it is), folder (task files), or jsonl (one `code` field a line)."
    ),
]
RootOpt = Annotated[
    Path, typer.Option("--root", help="The KernelBench checkout, the folder of task files, or the JSONL file.")
]
OutOpt = Annotated[
    Path,
    typer.Option("--out", help="Where results.jsonl, summary.json, report.md and report.html go (a rerun resumes)."),
]
LevelOpt = Annotated[Optional[str], typer.Option("--level", help="Levels to run, e.g. 1,2 (default: all).")]
TasksOpt = Annotated[Optional[str], typer.Option("--tasks", help="Problem ids, e.g. 1-20,40 (default: all).")]
SolutionsOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--solutions",
        help="Harness-only mode: score the candidates in DIR (KernelBench run folders or CUDA-Agent workdirs).",
    ),
]
MaxTurnsOpt = Annotated[Optional[int], typer.Option("--max-turns", min=1, help="Model turns per task (agent mode).")]
MaxCostOpt = Annotated[Optional[float], typer.Option("--max-cost", min=0, help="USD per task (agent mode).")]
TimeoutOpt = Annotated[
    Optional[float], typer.Option("--timeout", min=1, help="Wall seconds per task for the agent (agent mode).")
]
GpusOpt = Annotated[Optional[str], typer.Option("--gpus", help="all (default) or 0,1,...: one task per GPU at a time.")]
TaskVersionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--task-version",
        help="current (default: KernelBench's revised tasks) or original (the original definitions it keeps "
        "as N_Name_OLD.py, where a task was revised).",
    ),
]
BuildersOpt = Annotated[
    Optional[int],
    typer.Option(
        "--builders",
        min=0,
        help="Compile-ahead workers that build queued tasks' candidates while the devices time others "
        "(default: on a GPU as many as the cores beside the timing and the memory allow, two cores "
        "each; 0 on the CPU).",
    ),
]
RayOpt = Annotated[
    Optional[str],
    typer.Option(
        "--ray",
        help="auto or ADDRESS: run the tasks on the Ray cluster's GPUs, one worker per GPU (pip install 'cuda-agent[ray]').",
    ),
]
RerunOpt = Annotated[
    bool, typer.Option("--rerun-failed", help="Run again the tasks whose recorded result is not correct.")
]
PlainOpt = Annotated[bool, typer.Option("--plain", help="Plain progress lines even on a terminal.")]
ToleranceOpt = Annotated[
    Optional[str],
    typer.Option(
        "--tolerance",
        help="kernelbench: the paper's atol = rtol = 1e-2, to compare with published numbers "
        "(the same as --precision kernelbench; default: the module's own dtype).",
    ),
]


def task_line(done: int, total: int, record: dict[str, Any]) -> str:
    """One plain progress line for a finished task."""
    status = record.get("status")
    if record.get("correct"):
        what = (
            f"correct, reward {record.get('reward')}, {record.get('speedup_vs_eager') or 0:.2f}x eager, "
            f"{record.get('speedup_vs_compile') or 0:.2f}x compile"
        )
    else:
        what = f"{status}: {(record.get('error') or '')[:120]}"
    n = record.get("n_samples") or 0
    samples = f" [{record.get('n_correct', 0)}/{n} samples]" if n > 1 else ""
    wall = record.get("wall_s")
    return f"[{done}/{total}] {record.get('task')}: {what}{samples}" + (f" ({wall:.1f} s)" if wall else "")


class _Progress:
    """Rich progress on a terminal (done, pass rate so far, ETA, busy slots); plain lines otherwise."""

    def __init__(self, total: int, plain: bool, busy: Any) -> None:
        self.total, self.done, self.passed = total, 0, 0
        self.busy = busy
        self.rich = None
        if not plain and sys.stderr.isatty() and total:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                ProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.text import Text

            class Busy(ProgressColumn):
                def render(self, task: Any) -> Text:  # read at every refresh, not only per record
                    return Text(f"busy {busy()}")

            self.console = Console(stderr=True)
            self.rich = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("pass {task.fields[rate]}"),
                Busy(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self.task_id = self.rich.add_task("bench", total=total, rate="-")

    def __enter__(self) -> "_Progress":
        if self.rich:
            self.rich.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.rich:
            self.rich.stop()

    def __call__(self, job: dict[str, Any], record: dict[str, Any]) -> None:
        self.done += 1
        self.passed += 1 if record.get("correct") else 0
        line = task_line(self.done, self.total, record)
        if self.rich:
            self.rich.console.print(line, highlight=False, markup=False)
            self.rich.update(self.task_id, advance=1, rate=f"{100 * self.passed / self.done:.0f}%")
        else:
            typer.echo(line, err=True)


def _headline(summary: dict[str, Any], out: Path) -> list[str]:
    o = summary["overall"]
    gc = o["geomean"]["compile"]["correct_only"]["value"]
    rate = o["pass_rate"]
    return [
        f"{o['correct']}/{o['tasks']} correct ({100 * (rate or 0):.1f}%), faster than torch.compile by >5%: "
        f"{100 * (o['faster_than_compile'] or 0):.1f}%, geomean vs compile (correct only): "
        + (f"{gc:.2f}x" if gc else "n/a"),
        f"results: {out / 'results.jsonl'}; report: {out / 'report.md'}, {out / 'report.html'}",
    ]


def bench(
    root: RootOpt,
    suite: SuiteOpt = "kernelbench",
    out: OutOpt = Path("bench-out"),
    level: LevelOpt = None,
    tasks: TasksOpt = None,
    solutions: SolutionsOpt = None,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    max_turns: MaxTurnsOpt = None,
    max_cost: MaxCostOpt = None,
    timeout: TimeoutOpt = None,
    device: DeviceOpt = None,
    policy: PolicyOpt = None,
    reward_baseline: RewardBaselineOpt = None,
    precision: PrecisionOpt = None,
    tolerance: ToleranceOpt = None,
    gpus: GpusOpt = None,
    ray: RayOpt = None,
    builders: BuildersOpt = None,
    task_version: TaskVersionOpt = None,
    rerun_failed: RerunOpt = False,
    trials: TrialsOpt = None,
    unsafe: UnsafeOpt = False,
    plain: PlainOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Score a task suite with the paper's metrics: agent mode (--model) or harness-only (--solutions)."""
    from cuda_agent_cli.bench.run import BenchRequest, make_scheduler, plan_bench, run_bench

    req = BenchRequest(
        suite=suite,
        root=root,
        out=out,
        levels=level,
        tasks=tasks,
        solutions=solutions,
        model=model,
        api_base=api_base,
        max_turns=max_turns,
        max_cost=max_cost,
        timeout=timeout,
        device=device,
        policy=policy or "strict",
        reward_baseline=reward_baseline or "paper",
        precision=_precision(precision, tolerance),
        gpus=gpus,
        ray=ray,
        rerun_failed=rerun_failed,
        trials=trials,
        allow_unsafe=unsafe,
        compile_ahead=builders,
        task_version=task_version or "current",
    )
    plan = plan_bench(req)
    scheduler = make_scheduler(plan)
    total = len(plan.jobs)
    where = (
        f"Ray {ray}"
        if ray
        else (f"GPUs {','.join(s for s in plan.slots if s is not None)}" if plan.device == "cuda" else "the CPU")
    )
    typer.echo(
        f"bench: {total} task(s) to run on {where}, {len(plan.skipped)} already finished in {plan.store.out}", err=True
    )
    start = time.perf_counter()
    try:
        with _Progress(total, plain, lambda: getattr(scheduler, "busy", 0)) as progress:
            outcome = run_bench(plan, progress, scheduler=scheduler)
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted: finished results are kept in {plan.store.out / 'results.jsonl'}; "
            "run the same command again to resume",
            err=True,
        )
        raise typer.Exit(130)
    if as_json:
        typer.echo(json.dumps(outcome.summary))
    else:
        for line in _headline(outcome.summary, outcome.out):
            typer.echo(line)
        typer.echo(f"wall time {time.perf_counter() - start:.1f} s")
    raise typer.Exit(0 if outcome.summary["overall"]["correct"] else 1)


def _precision(precision: str | None, tolerance: str | None) -> str:
    """--precision, or --tolerance kernelbench (its other spelling); "dtype" by default."""
    from cuda_agent_cli.errors import BadInput

    if tolerance is not None and tolerance != "kernelbench":
        raise BadInput(f"unknown tolerance {tolerance!r}", "use --tolerance kernelbench, or --precision")
    if tolerance and precision and precision != tolerance:
        raise BadInput("--tolerance kernelbench and --precision say two things", "give one of them")
    return tolerance or precision or "dtype"
