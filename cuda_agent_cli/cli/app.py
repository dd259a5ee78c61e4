"""The typer app and its command list: every command of `cuda-agent`, registered here by name.

The command modules define plain functions over the shared options and import heavy things only
inside them, so building the app (and `cuda-agent --help`) stays instant.
"""

from __future__ import annotations

from typing import Annotated, Callable

import typer

from cuda_agent_cli import __version__
from cuda_agent_cli.cli import bench, chat, check, doctor, harness, optimize, sessions, trace

# (name, function) in the order `cuda-agent --help` lists them.
COMMANDS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("bench", bench.bench),
    ("check", check.check),
    ("build", check.build),
    ("chat", chat.chat),
    ("doctor", doctor.doctor),
    ("verify", harness.verify),
    ("profile", harness.profile),
    ("optimize", optimize.optimize),
    ("demo", optimize.demo),
    ("sessions", sessions.sessions),
    ("trace", trace.trace),
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cuda-agent {__version__}")
        raise typer.Exit(0)


def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    # --debug is read by main() from the raw arguments, before typer parses them.
    return None


def make_app() -> typer.Typer:
    app = typer.Typer(
        name="cuda-agent",
        help="Make PyTorch modules faster with custom CUDA kernels, verified and timed by a locked harness.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},  # every command inherits it
    )
    app.callback()(_root)
    for name, function in COMMANDS:
        app.command(name)(function)
    return app


app = make_app()
