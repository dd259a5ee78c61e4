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


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", ["profile", "bench"])
def test_trials_help_states_the_harness_defaults(command: str) -> None:
    from cuda_agent_cli.harness.driver import _MIN_TRIALS, DEFAULT_TRIALS

    text = _flat(_help(command, "-h"))
    cuda, cpu = DEFAULT_TRIALS["cuda"][0], DEFAULT_TRIALS["cpu"][0]
    assert f"(default {cuda} on cuda, {cpu} on cpu; fewer, at least {_MIN_TRIALS}, for inputs" in text


def test_other_stated_defaults_are_the_codes() -> None:
    from cuda_agent_cli.config import Settings

    defaults = Settings()
    assert f"(default {defaults.max_turns})" in _flat(_help("optimize", "-h"))
    assert defaults.atol == defaults.rtol == 1e-2
    assert "Absolute tolerance of the element-wise check (default 1e-2)" in _flat(_help("verify", "-h"))
    assert "Relative tolerance of the element-wise check (default 1e-2)" in _flat(_help("profile", "-h"))
    # The precision rule's default is the one the judge applies.
    assert defaults.precision == "dtype" and "dtype (default" in _flat(_help("profile", "-h"))
