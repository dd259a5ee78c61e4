"""`cuda-agent trace [--json] -- CMD ...`: run the user's command and say what the kernels did."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cuda_agent_cli.cli.options import JsonOpt


def trace(
    command: Annotated[Optional[list[str]], typer.Argument(help="The command to run, after --.")] = None,
    repeat: Annotated[
        int, typer.Option("--repeat", min=0, help="Timed runs each way, with and without kernels (default 3).")
    ] = 3,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds one run of the command may take (default 3600).")
    ] = 3600.0,
    as_json: JsonOpt = False,
) -> None:
    """Run CMD and report, per integrated kernel, the calls that took it and those that ran the
    original code (by reason), and the command's time with and without kernels."""
    import json

    from cuda_agent_cli.check.trace import summary_lines
    from cuda_agent_cli.check.trace import trace as run_trace
    from cuda_agent_cli.cli.json_errors import errors_as_json

    with errors_as_json(as_json):

        def stage(message: str) -> None:
            if not as_json:
                typer.echo(message, err=True)

        report = run_trace(list(command or []), Path.cwd(), repeat=repeat, timeout=timeout, stage=stage)
        if as_json:
            typer.echo(json.dumps(report.to_json()))
        else:
            for line in summary_lines(report):
                typer.echo(line)
