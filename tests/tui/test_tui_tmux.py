"""The real `cuda-agent chat` in a real terminal (tmux): type with send-keys, read the screen with
capture-pane, through a whole replayed /optimize on the CPU device, the review, the apply and
the quit with the session saved; keys typed ahead; and text typed while an approval shows."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from chat_helpers import git, replay_file
from tmux_helpers import Tmux, cuda_agent_command, wait_exit

from cuda_agent_cli import demo
from cuda_agent_cli.writeback.git import init_repo

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)"),
]


def test_chat_in_tmux_runs_a_replayed_optimize_to_a_commit(tmp_path: Path, harness_cache: Path):
    repo = tmp_path / "project"
    demo.copy_example(repo)
    init_repo(repo, "example")
    base = git(repo, "rev-parse", "HEAD").strip()
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_CACHE_HOME": str(harness_cache.parent),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TERM": "xterm-256color",
    }
    log = tmp_path / "after-exit.txt"
    term = Tmux(f"cuda-agent-test-{os.getpid()}")
    term.start(
        cuda_agent_command(
            ["chat", str(repo), "--model", f"replay:{demo.replay_path('cpu')}", "--device", "cpu"], env, log
        )
    )
    try:
        term.wait("cuda-agent chat over project/", 60)
        line = f'/optimize {demo.EXAMPLE}::{demo.CLASS} --inputs "{demo.INPUTS["cpu"]}"'
        term.keys(line, literal=True)
        term.keys("Enter")
        shown = term.wait("y: apply (branch, commit, manifest)", 500)
        assert "Review: vit_head.py::PooledLayerNorm" in shown and "eager PyTorch" in shown
        assert "diff --git" in shown
        term.keys("y")
        term.wait("applied: committed", 60)
        term.wait("x eager, ", 30)  # the status bar has the verified speedup
        term.keys("C-c")
        time.sleep(0.5)
        term.keys("C-c")
        assert wait_exit(log) == "EXIT=0"
        assert "saved — `cuda-agent chat --resume" in term.screen()
    finally:
        term.close()
    head = git(repo, "rev-parse", "HEAD").strip()
    assert head != base
    assert ".cuda-agent/kernels.toml" in git(repo, "show", "--name-only", "--format=", head)


def test_keys_typed_ahead_in_a_real_terminal_reach_the_help_and_the_prompt_in_order(tmp_path: Path):
    """What tmux's send-keys sends at once (one write, as keys typed ahead arrive): `/help`,
    Enter, Esc, `/optimize ...`, Enter opens the help, closes it and runs the /optimize line as
    typed; then `/undo` with its completion showing runs /undo once."""
    repo = tmp_path / "project"
    (repo / "mixers").mkdir(parents=True)
    (repo / "mixers" / "blend.py").write_text(
        "import torch\n\n\nclass Blend(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    )
    init_repo(repo, "blend")
    model = tmp_path / "none.jsonl"
    model.write_text("")
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TERM": "xterm-256color",
    }
    log = tmp_path / "after-exit.txt"
    term = Tmux(f"cuda-agent-keys-{os.getpid()}")
    term.start(cuda_agent_command(["chat", str(repo), "--model", f"replay:{model}", "--device", "cpu"], env, log))
    try:
        term.wait("cuda-agent chat over project/", 60)
        term.keys("/help", "Enter", "Escape", "/optimize mixers/blend.py::Blend", "Enter")
        shown = term.wait("no way to make inputs for Blend", 120)
        assert "› /optimize mixers/blend.py::Blend" in shown and "Esc closes this help" not in shown
        term.keys("/help", "Enter", "Escape", "/undo", "Enter")
        shown = term.wait("nothing to undo", 30)
        assert "unknown command" not in shown and "Esc closes this help" not in shown
        assert "Message cuda-agent" in shown  # the prompt is empty again: its placeholder shows
        term.keys("C-c")
        time.sleep(0.5)
        term.keys("C-c")
        assert wait_exit(log) == "EXIT=0"
    finally:
        term.close()


def test_text_typed_while_an_approval_shows_in_a_real_terminal_answers_nothing(tmp_path: Path):
    """A Write approval on screen and `/nosuch`, Enter, `hello again`, Enter typed at once: the
    question stays, nothing is written, the dialog says the typing went to the prompt; Tab and
    Enter then allow the write once, and the queued message is sent after the turn."""
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    init_repo(repo, "a")
    model = replay_file(
        tmp_path / "r.jsonl",
        [
            {
                "content": None,
                "tool_calls": [{"name": "Write", "arguments": {"file_path": "b.py", "content": "b = 2\n"}}],
            },
            {"content": "Wrote b.py.", "tool_calls": []},
            {"content": "Hello again to you.", "tool_calls": []},
        ],
    )
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TERM": "xterm-256color",
    }
    log = tmp_path / "after-exit.txt"
    term = Tmux(f"cuda-agent-approval-{os.getpid()}")
    args = ["chat", str(repo), "--model", f"replay:{model}", "--device", "cpu", "--mode", "ask"]
    term.start(cuda_agent_command(args, env, log))
    try:
        term.wait("cuda-agent chat over project/", 60)
        term.keys("write b", "Enter")
        term.wait("Tab or ←/→ picks, Enter takes it", 60)  # the question, its choices open
        assert "Allow Write b.py?" in term.screen()
        term.keys("/nosuch", "Enter", "hello again", "Enter")
        shown = term.wait("typed text went to the prompt", 30)
        time.sleep(1.0)  # every key has been taken by now
        shown = term.screen()
        assert "Allow Write b.py?" in shown and "typed text went to the prompt" in shown
        assert not (repo / "b.py").exists()
        term.keys("Tab")
        term.wait("Enter: allow this once", 30)
        term.keys("Enter")
        shown = term.wait("Hello again to you.", 60)
        assert (repo / "b.py").read_text() == "b = 2\n"
        assert "unknown command /nosuch" in shown and "Wrote b.py." in shown and "› hello again" in shown
        term.keys("C-c")
        time.sleep(0.5)
        term.keys("C-c")
        assert wait_exit(log) == "EXIT=0"
    finally:
        term.close()
