"""The real `cuda-agent chat` in a real terminal (tmux): type with send-keys, read the screen with
capture-pane, through a whole replayed /optimize on the CPU device, the review, the apply and
the quit with the session saved."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from chat_helpers import git

from cuda_agent_cli import demo
from cuda_agent_cli.writeback.git import init_repo

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")]


SOCKET = f"cuda-agent-test-{os.getpid()}"  # a private tmux server: nobody else's sessions or sizes


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True).stdout


def screen(name: str) -> str:
    return tmux("capture-pane", "-p", "-t", name)


def wait_screen(name: str, needle: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        shown = screen(name)
        if needle in shown:
            return shown
        time.sleep(0.3)
    raise AssertionError(f"{needle!r} never appeared; the screen shows:\n{shown}")


def test_chat_in_tmux_runs_a_replayed_optimize_to_a_commit(tmp_path: Path, harness_cache: Path):
    repo = tmp_path / "project"
    demo.copy_example(repo)
    init_repo(repo, "example")
    base = git(repo, "rev-parse", "HEAD").strip()
    name = f"cuda-agent-test-{os.getpid()}"
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_CACHE_HOME": str(harness_cache.parent), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TERM": "xterm-256color"}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    log = tmp_path / "after-exit.txt"
    cmd = (f"env -u COLUMNS -u LINES {exports} {shlex.quote(sys.executable)} -m cuda_agent_cli chat {shlex.quote(str(repo))} "
           f"--model replay:{shlex.quote(str(demo.replay_path('cpu')))} --device cpu; echo EXIT=$? > {log}; sleep 30")
    tmux("new-session", "-d", "-s", name, "-x", "150", "-y", "45", cmd)
    try:
        # A detached session may keep the default 80x24 until told otherwise.
        subprocess.run(["tmux", "-L", SOCKET, "resize-window", "-t", name, "-x", "150", "-y", "45"],
                       capture_output=True)
        wait_screen(name, "cuda-agent chat over project/", 60)
        line = f'/optimize {demo.EXAMPLE}::{demo.CLASS} --inputs "{demo.INPUTS["cpu"]}"'
        tmux("send-keys", "-t", name, "-l", line)
        tmux("send-keys", "-t", name, "Enter")
        shown = wait_screen(name, "y: apply (branch, commit, manifest)", 500)
        assert "Review: vit_head.py::PooledLayerNorm" in shown and "eager PyTorch" in shown
        assert "diff --git" in shown
        tmux("send-keys", "-t", name, "y")
        wait_screen(name, "applied: committed", 60)
        wait_screen(name, "x eager, ", 30)  # the status bar has the verified speedup
        tmux("send-keys", "-t", name, "C-c")
        time.sleep(0.5)
        tmux("send-keys", "-t", name, "C-c")
        deadline = time.monotonic() + 30
        while not log.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert log.read_text().strip() == "EXIT=0"
        assert "saved — `cuda-agent chat --resume" in screen(name)
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert head != base
    assert ".cuda-agent/kernels.toml" in git(repo, "show", "--name-only", "--format=", head)
