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
    summary object. Returns the exit code.

    What is wrong with the run as a whole (its targets, the progress file, the settings every
    session shares) raises before the first target; what is wrong with one target is its line."""
    from cuda_agent_cli.cli.json_errors import error_object
    from cuda_agent_cli.errors import CudaAgentError, Interrupted
    from cuda_agent_cli.run.batch import source_hash, summary

    shared, entries, progress = _prepare(base)
    root = shared.cwd
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
            run_and_review(replace(shared, target=entry.target, inputs=entry.inputs), opts, got.update)
        except Interrupted:
            raise  # not a finished target: the command's error object, and the rerun runs it again
        except CudaAgentError as exc:
            got = error_object(exc)
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


def _prepare(base: Any) -> tuple[Any, list[Any], Any]:
    """The request every target's session starts from (at the repository root, its settings
    resolved), the targets and the progress file, each target's text parsed and the sessions'
    shared settings checked: bad input (exit 2) or a missing environment (exit 3) before
    anything runs."""
    from cuda_agent_cli.config import TARGETS_HINT, repo_targets, user_data_dir
    from cuda_agent_cli.errors import BadInput
    from cuda_agent_cli.run.batch import Progress, progress_path
    from cuda_agent_cli.run.optimize import check_request, resolve_config

    entries, pyproject = repo_targets(base.cwd)
    if not entries:
        where = (
            f"{pyproject} has no [tool.cuda-agent] targets"
            if pyproject
            else f"no pyproject.toml at or above {base.cwd} (up to the git root)"
        )
        raise BadInput(f"optimize --all has no targets: {where}", TARGETS_HINT)
    root = pyproject.parent if pyproject else base.cwd
    for i, entry in enumerate(entries, 1):
        _parse_entry(entry, i, pyproject, root)
    # One configuration for every session: the same repository and the same flags.
    shared = replace(base, cwd=root)
    shared = replace(shared, config=resolve_config(shared))
    configured = shared.config.data_dir
    data_dir = Path(configured).expanduser() if configured else user_data_dir()
    progress = Progress.load(progress_path(data_dir, root))
    check_request(shared, data_dir)
    return shared, entries, progress


def _parse_entry(entry: Any, index: int, pyproject: Path | None, root: Path) -> None:
    """A target text or inputs text that does not parse, said as the entry of pyproject.toml it is.
    Whether the class imports and takes those inputs is for its own session to find out."""
    from cuda_agent_cli.errors import ConfigError, InputSpecError, TargetError
    from cuda_agent_cli.task.inputs import parse_inputs_spec
    from cuda_agent_cli.task.target import parse_target

    where = f"{pyproject} [tool.cuda-agent] targets: entry {index} (`{entry.target}`)"
    try:
        parse_target(entry.target, root)
        if entry.inputs:
            parse_inputs_spec(entry.inputs)
    except (TargetError, InputSpecError) as exc:
        # The spec's own messages speak of the --inputs flag; here it is the entry's `inputs`.
        message = "inputs" + exc.message[len("--inputs") :] if exc.message.startswith("--inputs") else exc.message
        raise ConfigError(f"{where}: {message}", exc.hint) from None


def _emit(opts: Any, result: dict[str, Any], line: str) -> None:
    typer.echo(line, err=opts.json_out)
    if opts.json_out:
        typer.echo(json.dumps(result))
