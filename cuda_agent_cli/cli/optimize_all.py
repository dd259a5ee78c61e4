"""`cuda-agent optimize --all`: every target of `[tool.cuda-agent] targets`, one session after
another through the same runner and review as `optimize TARGET`, resumable (run/batch.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import typer


def optimize_all(base: Any, opts: Any, run_and_review: Callable[..., int]) -> int:
    """Run each configured target with `base` (an OptimizeRequest without a target) through
    `run_and_review` (optimize's own); with --json one line per target as it finishes, then the
    summary object. Returns the exit code."""
    from cuda_agent_cli.config import TARGETS_HINT, load_config, repo_targets, user_data_dir
    from cuda_agent_cli.errors import BadInput, CudaAgentError, Interrupted
    from cuda_agent_cli.run.batch import Progress, progress_path, source_hash, summary

    entries, pyproject = repo_targets(base.cwd)
    if not entries:
        where = (
            f"{pyproject} has no [tool.cuda-agent] targets"
            if pyproject
            else f"no pyproject.toml at or above {base.cwd} (up to the git root)"
        )
        raise BadInput(f"optimize --all has no targets: {where}", TARGETS_HINT)
    root = pyproject.parent if pyproject else base.cwd
    configured = load_config({}, cwd=root).data_dir
    data_dir = Path(configured).expanduser() if configured else user_data_dir()
    progress = Progress.load(progress_path(data_dir, root))
    results: list[dict[str, Any]] = []
    skipped = 0
    for i, entry in enumerate(entries, 1):
        source = source_hash(entry.target, root)
        done = progress.finished(entry, source)
        if done is not None:
            skipped += 1
            results.append(done)
            _emit(
                opts,
                done,
                f"[{i}/{len(entries)}] {entry.target}: finished before "
                f"({done.get('status')}), skipped; its session is {done.get('session_id')}",
            )
            continue
        typer.echo(f"[{i}/{len(entries)}] {entry.target}", err=True)
        got: dict[str, Any] = {}
        try:
            run_and_review(replace(base, target=entry.target, inputs=entry.inputs, cwd=root), opts, got.update)
        except Interrupted:
            raise
        except CudaAgentError as exc:
            if not opts.json_out:
                typer.echo(f"error: {exc.one_line()}", err=True)
        result = {**got, "target": got.get("target") or entry.target}
        if result.get("status") != "error":
            progress.record(entry, source, result)
        results.append(result)
        if opts.json_out:
            typer.echo(json.dumps(result))
    total = summary(results, skipped)
    if opts.json_out:
        typer.echo(json.dumps(total))
    else:
        counts = ", ".join(f"reward {k}: {v}" for k, v in total["by_reward"].items())
        typer.echo(
            f"{total['correct']} of {total['targets']} target(s) have a correct kernel ({counts}); "
            f"{total['skipped']} skipped as finished before; ${total['cost_usd']:.2f}"
        )
    return int(total["exit_code"])


def _emit(opts: Any, result: dict[str, Any], line: str) -> None:
    typer.echo(line, err=opts.json_out)
    if opts.json_out:
        typer.echo(json.dumps(result))
