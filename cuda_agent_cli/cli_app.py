"""The typer app, shared options and helpers that every command module registers on.

Command modules (cli_*.py) import heavy things only inside their functions, so
`cuda-agent --help` stays instant.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cuda_agent_cli import __version__

app = typer.Typer(
    name="cuda-agent",
    help="Make PyTorch modules faster with custom CUDA kernels, verified and timed by a locked harness.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_state = {"debug": False}

DeviceOpt = Annotated[Optional[str], typer.Option("--device", help="cuda or cpu (default: cuda when a GPU is present).")]
ModelOpt = Annotated[Optional[str], typer.Option("--model", help="A litellm model string, or replay:FILE.jsonl.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cuda-agent {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    _state["debug"] = debug


def resolve_device(requested: str | None) -> str:
    """cuda when asked or when a GPU is present, else cpu."""
    if requested:
        return requested
    from cuda_agent_cli.doctor import torch_info

    return "cuda" if torch_info().cuda_available else "cpu"
