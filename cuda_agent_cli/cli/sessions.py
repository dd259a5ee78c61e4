"""`cuda-agent sessions`: the stored sessions, newest first, each with its repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_LIMIT = 20


def _speedup(v: float | None) -> str:
    return f"{v:.2f}x" if isinstance(v, (int, float)) else "-"


def _where(repo: str | None) -> str:
    """A repository path as the table shows it: under the home folder with ~."""
    if not repo:
        return "-"
    home = str(Path.home())
    return "~" + repo[len(home) :] if repo == home or repo.startswith(home + "/") else repo


def sessions(
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print a JSON array instead of text: one object per session, newest first (docs/configuration.md).",
        ),
    ] = False,
    limit: Annotated[
        int, typer.Option("--limit", help=f"Show at most this many, newest first (default {DEFAULT_LIMIT}).")
    ] = DEFAULT_LIMIT,
    every: Annotated[bool, typer.Option("--all", help="Show every stored session (no --limit).")] = False,
) -> None:
    """List stored sessions of every repository: id, date, repository, target, status, turns, cost, best speedup."""
    from cuda_agent_cli.errors import BadInput

    if limit < 1:
        raise BadInput(
            f"--limit {limit}: the number of sessions to show must be 1 or more",
            f"pass a positive --limit (the default is {DEFAULT_LIMIT}), or --all to show every session",
        )
    from cuda_agent_cli.agent.session_store import list_sessions
    from cuda_agent_cli.config import load_config

    cfg = load_config({})
    found = list_sessions(Path(cfg.data_dir) if cfg.data_dir else None)
    if not every:
        found = found[:limit]
    if json_out:
        typer.echo(json.dumps([s.to_json() for s in found], indent=2))
        return
    if not found:
        typer.echo("no sessions yet — start one with `cuda-agent optimize path/to/file.py::Module`")
        return
    rows = [("ID", "KIND", "DATE", "REPOSITORY", "TARGET", "STATUS", "TURNS", "COST", "VS EAGER", "VS COMPILE")]
    for s in found:
        rows.append(
            (
                s.session_id,
                s.kind,
                s.created.replace("T", " "),
                _where(s.repo),
                s.target or "-",
                s.status,
                str(s.turns),
                f"${s.cost_usd:.4f}",
                _speedup(s.best_speedup_vs_eager),
                _speedup(s.best_speedup_vs_compile),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    typer.echo(
        "resume one with `cuda-agent optimize --resume ID` or, for a chat, `cuda-agent chat --resume ID` "
        "(--continue takes the latest of the repository you are in)"
    )
