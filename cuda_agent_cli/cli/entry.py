"""The command line entry point: runs the app and maps the one exception tree to exit codes.

The exit codes are the documented ones (README, docs/architecture.md). Only the CLI and the TUI
print.
"""

from __future__ import annotations

import sys

import typer

from cuda_agent_cli.cli.app import app
from cuda_agent_cli.errors import CudaAgentError, no_space_left


def _usage_errors() -> tuple[type[Exception], ...]:
    """Usage-error classes: recent typer vendors click, older typer re-uses the click package."""
    found: list[type[Exception]] = []
    if hasattr(typer, "TyperException"):
        found.append(typer.TyperException)
    try:
        import click

        found.append(click.ClickException)
    except ImportError:
        pass
    return tuple(found)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and map errors to the documented exit codes with one clear line."""
    command = typer.main.get_command(app)
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        rc = command.main(args=args, prog_name="cuda-agent", standalone_mode=False)
    except CudaAgentError as exc:
        if debug:
            raise
        typer.echo(f"error: {exc.one_line()}", err=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except _usage_errors() as exc:
        # Usage errors (unknown command, bad option): typer formats them; exit 2.
        exc.show()  # type: ignore[attr-defined]
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a full disk anywhere a command writes, or a bug: one line
        full = no_space_left(exc)
        if full is not None and not debug:
            typer.echo(f"error: {full.one_line()}", err=True)
            sys.exit(full.exit_code)
        if debug:
            raise
        typer.echo(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)", err=True)
        sys.exit(1)
    sys.exit(rc if isinstance(rc, int) else 0)
