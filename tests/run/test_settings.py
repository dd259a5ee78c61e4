"""A resumed session's settings: its own values as a configuration layer, and the flags refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_cli.config import load_config
from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.run.settings import SavedTask, load_task, refuse_changes_on_resume, save_task

SAVED = SavedTask(
    target="pkg/a.py::A",
    cwd="/repo",
    call={"source": "spec", "init": [], "args": []},
    explicit_inputs=True,
    device="cpu",
    policy="strict",
    model="replay:/r.jsonl",
    api_base=None,
)


def test_task_json_round_trips(tmp_path: Path) -> None:
    save_task(tmp_path, SAVED)
    assert load_task(tmp_path) == SAVED


def test_a_session_not_started_by_optimize_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not started by optimize"):
        load_task(tmp_path)


def test_the_session_layer_sits_under_the_flags_and_over_the_environment(tmp_path: Path) -> None:
    env = {"CUDA_AGENT_MODEL": "openai/gpt-4.1", "CUDA_AGENT_POLICY": "hybrid", "XDG_CONFIG_HOME": str(tmp_path)}
    cfg = load_config({"max_turns": 7}, cwd=tmp_path, env=env).with_session(SAVED.session_layer())
    assert (cfg.model, cfg.policy, cfg.device, cfg.max_turns) == ("replay:/r.jsonl", "strict", "cpu", 7)
    assert cfg.origin("model") == "the resumed session" and cfg.origin("max_turns") == "--max-turns"
    flagged = load_config({"model": "openai/o3"}, cwd=tmp_path, env=env).with_session(SAVED.session_layer())
    assert flagged.model == "openai/o3" and flagged.origin("model") == "--model"


def test_flags_that_would_change_the_session_are_refused_in_one_line() -> None:
    with pytest.raises(BadInput) as info:
        refuse_changes_on_resume("S1", SAVED, device="cuda", policy=None, inputs="x=float32[2]", capture=None)
    line = info.value.one_line()
    assert "\n" not in line
    assert line.startswith("--device cuda and --inputs cannot change resumed session S1")
    assert "start a new session" in line


def test_the_same_values_again_are_not_a_change() -> None:
    refuse_changes_on_resume("S1", SAVED, device="cpu", policy="strict", inputs=None, capture=None)
