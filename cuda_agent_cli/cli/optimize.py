"""`cuda-agent optimize TARGET` and `cuda-agent demo`: run a session, review, apply with a yes."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer

from cuda_agent_cli.cli.options import (
    AllowDirtyOpt,
    ApiBaseOpt,
    BatchOpt,
    DeviceOpt,
    JsonOpt,
    ModelOpt,
    NoApplyOpt,
    NoCommitOpt,
    PatchOpt,
    PlainOpt,
    PolicyOpt,
    PrecisionOpt,
    RewardBaselineOpt,
    UnsafeOpt,
    YesOpt,
)

if TYPE_CHECKING:
    from cuda_agent_cli.run.optimize import OptimizeRequest
    from cuda_agent_cli.tui.task import OptimizeApp


@dataclass
class ReviewOptions:
    yes: bool = False
    no_apply: bool = False
    patch: Path | None = None
    no_commit: bool = False
    allow_dirty: bool = False
    batch: bool = False
    json_out: bool = False
    plain: bool = False


def _check_flags(opts: ReviewOptions) -> None:
    from cuda_agent_cli.errors import BadInput

    if opts.yes and opts.no_apply:
        raise BadInput("--yes and --no-apply contradict each other", "pass one of them")


def _will_try_apply(opts: ReviewOptions) -> bool:
    return not opts.no_apply and (opts.yes or not opts.batch)


def _apply_intent(opts: ReviewOptions) -> Any:
    """What the runner checks before the session when this review may end in applying."""
    from cuda_agent_cli.run.optimize import ApplyIntent

    if not _will_try_apply(opts):
        return None
    return ApplyIntent(commit=not opts.no_commit, allow_dirty=opts.allow_dirty)


def _result_json(
    outcome: Any, applied: Any, patch_path: str | None, apply_note: str | None, end_to_end: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The one object of `--batch --json`; docs/optimize.md lists exactly these keys (a test holds them together)."""
    best = outcome.result
    t = best.timings if best else None
    return {
        "status": outcome.status,
        "reward": outcome.reward,
        "speedups": {"vs_eager": t.speedup_vs_eager if t else None, "vs_compile": t.speedup_vs_compile if t else None},
        "timings": t.to_json() if t else None,
        "warnings": list(best.warnings) if best else [],
        "inputs": outcome.inputs,
        "shapes": outcome.shapes.to_json() if outcome.shapes else None,
        "deployment": outcome.deployment.to_json() if outcome.deployment else None,
        "end_to_end": end_to_end,
        "best_candidate_files": outcome.best_files,
        "applied": bool(applied),
        "apply_note": apply_note,
        "branch": applied.branch if applied else None,
        "commit": applied.commit if applied else None,
        "written": applied.written if applied else [],
        "patch": patch_path,
        "session_id": outcome.session_id,
        "transcript": str(outcome.transcript),
        "cost_usd": round(outcome.cost_usd, 6),
        "turns": outcome.turns,
        "stop_reason": outcome.stop_reason,
        "stop_detail": outcome.stop_detail,
        "device": outcome.device,
        "policy": outcome.policy,
        "precision": best.precision if best else None,
        "target": outcome.target,
        "environment": best.to_json()["environment"] if best else None,
    }


def run_and_review(req: Any, opts: ReviewOptions, on_result: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Run the session with progress, show the review, apply on yes; returns the exit code.

    `on_result` receives the `--batch --json` object instead of stdout. An error is raised: the
    command's `errors_as_json` prints its object (optimize --all makes it that target's line)."""
    from rich.console import Console

    from cuda_agent_cli import preflight
    from cuda_agent_cli.cli import render
    from cuda_agent_cli.run.optimize import exit_code_for, resolve_config, run_optimize

    _check_flags(opts)
    req.config = resolve_config(req)  # once for the run: the TUI's status bar and the session read it
    err_console = Console(stderr=True)
    out_console = Console(stderr=opts.json_out)  # with --json stdout holds the JSON object only
    if opts.patch is not None:
        opts.patch = preflight.check_patch_file(opts.patch)
    req.apply = _apply_intent(opts)
    banner = _unsafe_banner(req.allow_unsafe)
    if _use_tui(opts):
        return _run_in_tui(req, opts, banner, out_console, err_console)
    if opts.batch or not sys.stdout.isatty():
        progress: Any = render.PlainProgress(sys.stderr)
        if banner:
            err_console.print(f"[bold red]{banner}[/bold red]")
        outcome = run_optimize(req, sink=progress, on_stage=progress.stage)
    else:
        with render.LiveProgress(out_console, banner) as live:
            outcome = run_optimize(req, sink=live, on_stage=live.stage)
    return _review(outcome, opts, out_console, err_console, exit_code_for(outcome), on_result)


def _use_tui(opts: ReviewOptions) -> bool:
    """The terminal app only where someone watches and answers: a terminal on both ends, and
    neither --plain (screen readers, CI logs) nor --batch/--json."""
    return not (opts.plain or opts.batch or opts.json_out) and sys.stdout.isatty() and sys.stdin.isatty()


def _run_in_tui(req: OptimizeRequest, opts: ReviewOptions, banner: str | None, console: Any, err_console: Any) -> int:
    """The same session and the same review as the linear output, with the TUI as the event sink
    and the one who asks y/n; what it answered is applied here, by the same code."""
    app = tui_app(req, opts, banner)
    try:
        app.run()
    finally:
        app.finish_work(timeout=60.0)  # a session cut short by quitting still records its stop
    return finish_tui(app, opts, console, err_console)


def tui_app(req: OptimizeRequest, opts: ReviewOptions, banner: str | None = None, **kw: Any) -> OptimizeApp:
    """The optimize app for this request: asks y/n unless --yes, refuses y with --no-apply."""
    from cuda_agent_cli.chat.optimize_task import task_runtime
    from cuda_agent_cli.tui.task import OptimizeApp

    refused = "not applied (--no-apply)" if opts.no_apply else None
    return OptimizeApp(req, task_runtime(req), ask=not opts.yes, refused=refused, banner=banner, **kw)


def finish_tui(app: OptimizeApp, opts: ReviewOptions, console: Any, err_console: Any) -> int:
    """After the app closed: its error with the plain path's line and exit code, or the review's
    answer applied (or not) and the session's summary left in the terminal."""
    from cuda_agent_cli.errors import Interrupted
    from cuda_agent_cli.run.optimize import exit_code_for

    if app.error is not None:
        raise app.error
    outcome = app.outcome
    if outcome is None:
        raise Interrupted("the session was closed before it finished", "cuda-agent optimize --continue resumes it")
    answer = bool(app.decision)
    return _review(outcome, opts, console, err_console, exit_code_for(outcome), asked=lambda _q: answer)


def _unsafe_banner(allow_unsafe: bool) -> str | None:
    if not allow_unsafe:
        return None
    from cuda_agent_cli.sandbox import UNSAFE_BANNER, probe

    return None if probe().available else UNSAFE_BANNER


def _review(
    outcome: Any,
    opts: ReviewOptions,
    console: Any,
    err_console: Any,
    code: int,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    asked: Any = None,
) -> int:
    """The review and the apply. `on_result` receives the `--batch --json` object instead of
    stdout; `asked`: the answer the TUI's review screen already gave (the review was shown
    there), else the question is asked here."""
    from cuda_agent_cli.cli import render
    from cuda_agent_cli.writeback.apply import apply_plan

    plan = outcome.plan
    if outcome.sandbox_banner and not opts.json_out:
        console.print(f"[bold red]{outcome.sandbox_banner}[/bold red]")
    if not opts.json_out:
        # The pager only where someone reads and answers: a terminal on both ends, no --batch.
        paged = not opts.batch and console.is_terminal and sys.stdin.isatty()
        if not outcome.best:
            console.print(
                f"no correct kernel in this session ({render.stop_line(outcome.stop_reason, outcome.stop_detail)})",
                highlight=False,
            )
        elif asked is None:
            render.render_review(console, outcome, paged=paged)
        if outcome.best:
            console.print(render.summary_line(outcome), highlight=False, soft_wrap=True, style="bold")
    patch_path = None
    if opts.patch is not None and plan is not None:
        patch_path = _save_patch(opts.patch, plan.patch)
    applied = None
    note = None
    if plan is None:
        note = "nothing to apply: no correct kernel"
    elif opts.no_apply:
        note = "not applied (--no-apply)"
    elif outcome.status != "improved":
        from cuda_agent_cli.run.optimize import not_applied

        note = f"not applied: {not_applied(outcome)}"
    elif opts.yes or (
        not opts.batch and (asked or (lambda q: render.confirm(console, q)))(f"Apply this kernel to {plan.module_rel}?")
    ):
        applied = apply_plan(plan, commit=not opts.no_commit, allow_dirty=opts.allow_dirty)
    else:
        note = "not applied" + (" (--batch without --yes)" if opts.batch else "")
    end_to_end = None
    if applied and outcome.capture:
        end_to_end = _end_to_end(outcome.capture, outcome.capture_cwd, err_console if opts.json_out else console)
    if on_result is not None:
        on_result(_result_json(outcome, applied, patch_path, note, end_to_end))
    elif opts.json_out:
        typer.echo(json.dumps(_result_json(outcome, applied, patch_path, note, end_to_end)))
    if not opts.json_out:
        if note:
            console.print(note)
        for line in render.summary_lines(outcome, applied, patch_path):
            console.print(line, highlight=False, soft_wrap=True)
    return code


def _end_to_end(command: str, cwd: Path | None, console: Any) -> dict[str, Any] | None:
    """The captured command timed with and without the kernel just applied: the figure the
    user's own program gets (`cuda-agent trace` does the same at any later time)."""
    from cuda_agent_cli.check.trace import summary_lines, trace
    from cuda_agent_cli.errors import CudaAgentError

    console.print(f"timing `{command}` with and without the kernel (Ctrl-C skips it) ...", highlight=False)
    try:
        report = trace(["/bin/sh", "-c", command], cwd or Path.cwd(), repeat=2)
    except KeyboardInterrupt:
        console.print("skipped: `cuda-agent trace -- ...` times it later", highlight=False)
        return None
    except CudaAgentError as exc:
        console.print(f"not timed: {exc.one_line()}", highlight=False, soft_wrap=True)
        return None
    report.command = [command]
    for line in summary_lines(report):
        console.print(line, highlight=False, soft_wrap=True)
    return report.to_json()


def _save_patch(path: Path, text: str) -> str:
    from cuda_agent_cli.errors import WriteBackRefused

    try:
        with open(path, "x") as f:  # checked at the start; never replace a file made since
            f.write(text)
    except FileExistsError:
        raise WriteBackRefused(
            f"--patch {path} was created while the session ran; it was left as it is",
            "rerun with --resume ID --no-apply --patch NEW_FILE",
        ) from None
    return str(path.resolve())


def optimize(
    target: Annotated[
        Optional[str], typer.Argument(help="path/to/file.py::ClassName or package.module:ClassName")
    ] = None,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    device: DeviceOpt = None,
    policy: PolicyOpt = None,
    reward_baseline: RewardBaselineOpt = None,
    precision: PrecisionOpt = None,
    inputs: Annotated[
        Optional[list[str]],
        typer.Option(
            "--inputs",
            help='Example inputs, e.g. "x=float16[8,4096] cuda; init: 4096". Give it again (or separate specs '
            'with |) for more shapes; a named dimension takes a range: "x=float32[B,512], B=1..64".',
        ),
    ] = None,
    capture: Annotated[
        Optional[str],
        typer.Option("--capture", help="Run CMD and record its calls to the class (every signature, with counts)."),
    ] = None,
    max_turns: Annotated[
        Optional[int], typer.Option("--max-turns", help="Stop after this many model turns (default 200).")
    ] = None,
    max_cost: Annotated[
        Optional[float], typer.Option("--max-cost", help="Stop when the session has cost this many USD.")
    ] = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", help="Stop after this many seconds.")] = None,
    yes: YesOpt = False,
    no_apply: NoApplyOpt = False,
    patch: PatchOpt = None,
    no_commit: NoCommitOpt = False,
    allow_dirty: AllowDirtyOpt = False,
    batch: BatchOpt = False,
    json_out: JsonOpt = False,
    plain: PlainOpt = False,
    resume: Annotated[Optional[str], typer.Option("--resume", help="Continue the session with this id.")] = None,
    continue_: Annotated[
        bool, typer.Option("--continue", help="Continue the most recent optimize session of this repository.")
    ] = False,
    unsafe_no_sandbox: UnsafeOpt = False,
    all_: Annotated[
        bool,
        typer.Option(
            "--all", help="Every target of [tool.cuda-agent] targets in pyproject.toml, one after another (resumable)."
        ),
    ] = False,
) -> None:
    """Write, verify and time a custom kernel for a PyTorch module, then review it before applying.

    On a terminal the session runs in the terminal app (conversation, kernel ledger, review
    screen); --plain gives linear text instead (screen readers, CI logs), as do --batch and
    output that is not a terminal."""
    from cuda_agent_cli.cli.json_errors import errors_as_json
    from cuda_agent_cli.errors import BadInput
    from cuda_agent_cli.run.optimize import OptimizeRequest

    if json_out and not batch:
        batch = True  # one JSON object on stdout leaves no room for prompts
    opts = ReviewOptions(yes, no_apply, patch, no_commit, allow_dirty, batch, json_out, plain)
    req = OptimizeRequest(
        target=target,
        cwd=Path.cwd(),
        model=model,
        api_base=api_base,
        device=device,
        policy=policy,
        inputs=" | ".join(inputs) if inputs else None,
        capture=capture,
        max_turns=max_turns,
        max_cost=max_cost,
        timeout=timeout,
        resume=resume,
        continue_latest=continue_,
        allow_unsafe=unsafe_no_sandbox,
        reward_baseline=reward_baseline,
        precision=precision,
    )
    with errors_as_json(json_out):
        if all_:
            from cuda_agent_cli.cli.optimize_all import optimize_all

            _check_flags(opts)
            _refuse_with_all(req, patch)
            code = optimize_all(req, opts, run_and_review)
        elif not target and not (resume or continue_):
            raise BadInput("optimize needs a TARGET", "cuda-agent optimize path/to/file.py::ClassName (or --resume ID)")
        elif target and (resume or continue_):
            raise BadInput("pass either a TARGET or --resume/--continue, not both", "drop one of them")
        elif inputs and capture:
            raise BadInput("--inputs and --capture both say which calls to optimize for", "give one of them, not both")
        elif resume and continue_:
            raise BadInput("--resume ID and --continue both name a session", "give one of them, not both")
        else:
            code = run_and_review(req, opts)
    raise typer.Exit(code)


def _refuse_with_all(req: Any, patch: Path | None) -> None:
    """--all takes its targets and their inputs from pyproject.toml, and gives each a new session."""
    from cuda_agent_cli.errors import BadInput

    given = [
        flag
        for flag, value in (
            ("TARGET", req.target),
            ("--resume", req.resume),
            ("--continue", req.continue_latest or None),
            ("--inputs", req.inputs),
            ("--capture", req.capture),
            ("--patch", patch),
        )
        if value
    ]
    if given:
        raise BadInput(
            f"--all runs the targets of pyproject.toml, so {given[0]} cannot go with it",
            "drop it, or name one target without --all",
        )


def demo(
    device: DeviceOpt = None,
    directory: Annotated[
        Optional[Path],
        typer.Option("--dir", help="Where to put the example project (default: a new folder in the data dir)."),
    ] = None,
    yes: YesOpt = False,
    no_apply: NoApplyOpt = False,
    patch: PatchOpt = None,
    batch: BatchOpt = False,
    json_out: JsonOpt = False,
    plain: PlainOpt = False,
    unsafe_no_sandbox: UnsafeOpt = False,
) -> None:
    """Optimize a bundled example with a recorded session: no API key, real compile/verify/profile."""
    from cuda_agent_cli.cli.json_errors import errors_as_json

    with errors_as_json(json_out):
        code = _demo(device, directory, yes, no_apply, patch, batch, json_out, plain, unsafe_no_sandbox)
    raise typer.Exit(code)


def _demo(
    device: str | None,
    directory: Path | None,
    yes: bool,
    no_apply: bool,
    patch: Path | None,
    batch: bool,
    json_out: bool,
    plain: bool,
    unsafe_no_sandbox: bool,
) -> int:
    import time

    from cuda_agent_cli import demo as demo_assets
    from cuda_agent_cli import preflight
    from cuda_agent_cli.config import load_config, user_data_dir
    from cuda_agent_cli.machine import pick_device
    from cuda_agent_cli.run.optimize import OptimizeRequest
    from cuda_agent_cli.writeback.git import init_repo

    cfg = load_config({})
    base = Path(cfg.data_dir).expanduser() if cfg.data_dir else user_data_dir()
    if directory is None:
        preflight.check_store(
            base / "demo",
            "data dir",
            "set XDG_DATA_HOME (or data_dir in the config) to a folder you can write to, or pass --dir",
        )
    dest = (directory.expanduser() if directory else base / "demo" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    preflight.check_demo_dir(dest)
    if patch is not None:
        patch = preflight.check_patch_file(patch)
    dev = pick_device(device)
    demo_assets.copy_example(dest)
    init_repo(dest, "Example project for the cuda-agent demo")
    if json_out:
        batch = True
    shell = True
    if not unsafe_no_sandbox and not demo_assets.replay_runs_commands(dev):
        from cuda_agent_cli.sandbox import probe

        status = probe()
        if not status.available:
            # The recorded session only reads, writes and calls the harness: it can run with no
            # shell tools at all, so a machine without bubblewrap can still see the whole flow.
            shell = False
            typer.echo(
                f"note: no sandbox here ({status.detail}); the recorded session needs no shell, so the "
                "demo runs without shell tools. `cuda-agent optimize` needs bubblewrap: "
                "apt-get install bubblewrap",
                err=True,
            )
    req = OptimizeRequest(
        target=f"{demo_assets.EXAMPLE}::{demo_assets.CLASS}",
        cwd=dest,
        model=f"replay:{demo_assets.replay_path(dev)}",
        device=dev,
        inputs=demo_assets.INPUTS[dev],
        allow_unsafe=unsafe_no_sandbox,
        shell=shell,
    )
    if not json_out:
        typer.echo(
            f"demo: optimizing {demo_assets.EXAMPLE}::{demo_assets.CLASS} in {dest} on {dev} "
            "with a recorded session (the harness runs for real)",
            err=batch,
        )
    opts = ReviewOptions(yes, no_apply, patch, False, False, batch, json_out, plain)
    return run_and_review(req, opts)
