"""`cuda-agent optimize` in a real terminal (tmux): the terminal app by default, with the ledger and
the review screen; `--plain` gives the linear output and the y/N question instead. Both run the
recorded demo session on the CPU device against the real harness."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest
from chat_helpers import git
from tmux_helpers import Tmux, cuda_agent_command, wait_exit

from cuda_agent_cli import demo
from cuda_agent_cli.writeback.git import init_repo

NOT_FASTER = "n: close — correct but not faster than eager PyTorch"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)"),
]


def _start(tmp_path: Path, harness_cache: Path, *extra: str) -> tuple[Tmux, Path, Path]:
    repo = tmp_path / "project"
    demo.copy_example(repo)
    init_repo(repo, "example")
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_CACHE_HOME": str(harness_cache.parent),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TERM": "xterm-256color",
        "PAGER": "cat",
    }
    log = tmp_path / "after-exit.txt"
    args = [
        "optimize",
        f"{demo.EXAMPLE}::{demo.CLASS}",
        "--model",
        f"replay:{demo.replay_path('cpu')}",
        "--device",
        "cpu",
        "--inputs",
        demo.INPUTS["cpu"],
        *extra,
    ]
    term = Tmux(f"cuda-agent-optimize-{os.getpid()}")
    term.start(f"cd {shlex.quote(str(repo))} && " + cuda_agent_command(args, env, log), width=160, height=50)
    return term, repo, log


def test_optimize_on_a_terminal_shows_the_app_and_its_review(tmp_path: Path, harness_cache: Path):
    term, repo, log = _start(tmp_path, harness_cache)
    base = git(repo, "rev-parse", "HEAD").strip()
    try:
        # The ledger is drawn a frame or two after the first one: wait for it, not for the first.
        shown = term.wait("vs compile", 60)
        assert "cuda-agent optimize vit_head.py::PooledLayerNorm" in shown and "Esc interrupts" in shown
        # On a loaded machine the kernel may measure correct but not faster: then the review only
        # closes (nothing may land), which is as much the review screen.
        shown = term.wait("y: apply (branch, commit, manifest)", 500, NOT_FASTER)
        assert "Review: vit_head.py::PooledLayerNorm" in shown and "eager PyTorch" in shown
        assert "diff --git" in shown
        term.keys("n")
        assert wait_exit(log) == "EXIT=0"
        after = term.screen()
        assert "not applied" in after and "transcript" in after  # the summary stays in the terminal
        assert "vit_head.py::PooledLayerNorm · " in after
    finally:
        term.close()
    assert git(repo, "rev-parse", "HEAD").strip() == base and git(repo, "status", "--porcelain") == ""


def test_plain_on_a_terminal_gives_the_linear_output(tmp_path: Path, harness_cache: Path):
    term, repo, log = _start(tmp_path, harness_cache, "--plain")
    try:
        shown = term.wait("Apply this kernel to vit_head.py?", 500, "not faster than eager PyTorch")
        everything = term.screen(history=True)
        assert "Esc interrupts" not in everything and "Review: " not in everything  # no app
        assert "★ Profile:" in everything and "eager PyTorch" in everything  # the progress lines, the table
        assert "diff --git" in everything  # PAGER=cat: the diff is printed
        if "Apply this kernel" in shown:
            term.keys("n", "Enter")
        assert wait_exit(log) == "EXIT=0"
        assert "not applied" in term.screen()
    finally:
        term.close()
    assert git(repo, "status", "--porcelain") == ""
