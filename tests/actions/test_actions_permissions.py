"""Permission modes: ask, accept-edits, yolo; "always" remembers; reads never ask."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_cli.actions import ActionContext, Permissions, make_toolbox
from cuda_agent_cli.actions.permissions import command_program
from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, SandboxStatus


class Asker:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answers.pop(0)


def _toolbox(tmp_path: Path, mode: str, asker=None):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    sb = Sandbox(SandboxPolicy.repository(repo), SandboxStatus(False, "unit tests"), enabled=False)
    return make_toolbox(ActionContext(sb, permissions=Permissions(mode, asker)))


def _reads(tb) -> None:
    for name, args in [("Read", {"file_path": "a.py"}), ("Grep", {"pattern": "x"}), ("Glob", {"pattern": "*.py"})]:
        assert not tb.call(name, args).is_error, name


def test_ask_mode_asks_for_writes_and_a_no_leaves_the_file_alone(tmp_path: Path) -> None:
    asker = Asker("no")
    tb = _toolbox(tmp_path, "ask", asker)
    _reads(tb)
    r = tb.call("Write", {"file_path": "a.py", "content": "x = 2\n"})
    assert r.is_error and "declined" in r.output
    assert asker.prompts == ["Write a.py"]
    assert (tb.ctx.root / "a.py").read_text() == "x = 1\n"


def test_yes_allows_once_and_always_allows_the_rest_of_the_session(tmp_path: Path) -> None:
    asker = Asker("yes", "always")
    tb = _toolbox(tmp_path, "ask", asker)
    assert not tb.call("Write", {"file_path": "a.py", "content": "x = 2\n"}).is_error
    assert not tb.call("Edit", {"file_path": "a.py", "old_string": "2", "new_string": "3"}).is_error
    assert not tb.call("Write", {"file_path": "b.py", "content": ""}).is_error  # no third question
    assert len(asker.prompts) == 2


def test_always_for_a_command_covers_that_program_only(tmp_path: Path) -> None:
    asker = Asker("always", "no")
    tb = _toolbox(tmp_path, "ask", asker)
    assert not tb.call("Bash", {"command": "python -c 'print(1)'"}).is_error
    assert not tb.call("Bash", {"command": "python -c 'print(2)'"}).is_error
    assert tb.call("Bash", {"command": "rm a.py"}).is_error
    assert asker.prompts == ["Run `python -c 'print(1)'`", "Run `rm a.py`"]
    assert (tb.ctx.root / "a.py").exists()


def test_accept_edits_writes_freely_but_asks_before_commands(tmp_path: Path) -> None:
    asker = Asker("no")
    tb = _toolbox(tmp_path, "accept-edits", asker)
    assert not tb.call("Write", {"file_path": "a.py", "content": "x = 9\n"}).is_error
    assert tb.call("Bash", {"command": "echo hi"}).is_error
    assert asker.prompts == ["Run `echo hi`"]


def test_yolo_never_asks(tmp_path: Path) -> None:
    tb = _toolbox(tmp_path, "yolo", Asker())
    assert not tb.call("Write", {"file_path": "a.py", "content": "x = 9\n"}).is_error
    assert not tb.call("Bash", {"command": "echo hi"}).is_error


def test_without_anyone_to_ask_writes_are_refused(tmp_path: Path) -> None:
    tb = _toolbox(tmp_path, "ask", None)
    _reads(tb)
    r = tb.call("Write", {"file_path": "a.py", "content": "x"})
    assert r.is_error and "approval" in r.output


def test_unknown_mode_is_bad_input() -> None:
    with pytest.raises(BadInput):
        Permissions("sometimes")


def test_command_program_skips_assignments() -> None:
    assert command_program("CUDA_VISIBLE_DEVICES=0 python run.py") == "python"
    assert command_program("nvcc -O3 a.cu") == "nvcc"


def test_a_write_the_rules_refuse_is_not_put_to_the_user(tmp_path: Path) -> None:
    asker = Asker()
    tb = _toolbox(tmp_path, "ask", asker)
    r = tb.call("Write", {"file_path": ".git/config", "content": "x"})
    assert r.is_error and "protected" in r.output
    assert asker.prompts == []
