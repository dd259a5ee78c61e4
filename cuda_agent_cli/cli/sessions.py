"""`cuda-agent sessions`: the stored sessions, newest first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cuda_agent_cli.cli.options import JsonOpt


def _speedup(v: float | None) -> str:
    return f"{v:.2f}x" if isinstance(v, (int, float)) else "-"


def sessions(
    json_out: JsonOpt = False,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many (0: all).")] = 20,
) -> None:
    """List stored sessions: id, date, target, status, turns, cost, best speedup."""
    from cuda_agent_cli.agent.session import list_sessions
    from cuda_agent_cli.config import load_config

    cfg = load_config({})
    found = list_sessions(Path(cfg.data_dir) if cfg.data_dir else None)
    if limit > 0:
        found = found[:limit]
    if json_out:
        typer.echo(json.dumps([s.to_json() for s in found], indent=2))
        return
    if not found:
        typer.echo("no sessions yet — start one with `cuda-agent optimize path/to/file.py::Module`")
        return
    rows = [("ID", "KIND", "DATE", "TARGET", "STATUS", "TURNS", "COST", "VS EAGER", "VS COMPILE")]
    for s in found:
        rows.append(
            (
                s.session_id,
                s.kind,
                s.created.replace("T", " "),
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
        "(--continue takes the latest)"
    )
