"""Help: `-h` is `--help` for the app and every command, and the defaults the help texts state
are the ones the code uses."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cuda_agent_cli.cli.app import COMMANDS, app

RUNNER = CliRunner()


def _help(*args: str) -> str:
    result = RUNNER.invoke(app, list(args), prog_name="cuda-agent")
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", [None, *(name for name, _ in COMMANDS)])
def test_dash_h_is_help_everywhere(name: str | None) -> None:
    args = [name] if name else []
    short, long = _help(*args, "-h"), _help(*args, "--help")
    assert short == long and "Usage: cuda-agent" in short
