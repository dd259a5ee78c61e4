"""A real terminal for tests: a private tmux server, keys typed with send-keys, the screen read
with capture-pane."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path


class Tmux:
    def __init__(self, name: str) -> None:
        self.socket = f"cuda-agent-test-{os.getpid()}"  # nobody else's sessions or sizes
        self.name = name

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True).stdout

    def start(self, command: str, width: int = 150, height: int = 45) -> None:
        self("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), command)
        # A detached session may keep the default 80x24 until told otherwise.
        subprocess.run(
            ["tmux", "-L", self.socket, "resize-window", "-t", self.name, "-x", str(width), "-y", str(height)],
            capture_output=True,
        )

    def screen(self, history: bool = False) -> str:
        """What the pane shows (with `history`: and what scrolled off its top)."""
        return self("capture-pane", "-p", *(["-S", "-"] if history else []), "-t", self.name)

    def wait(self, needle: str, timeout: float, *others: str) -> str:
        """The screen once it shows `needle` (or one of `others`)."""
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if any(n in shown for n in (needle, *others)):
                return shown
            time.sleep(0.3)
        raise AssertionError(f"{needle!r} never appeared; the screen shows:\n{shown}")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self("send-keys", "-t", self.name, *(["-l"] if literal else []), *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def cuda_agent_command(args: list[str], env: dict[str, str], log: Path) -> str:
    """A shell line that runs cuda-agent with `env`, writes its exit status to `log` and keeps
    the pane open a while so the screen after the exit can be read."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    argv = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "cuda_agent_cli", *args])
    return f"env -u COLUMNS -u LINES {exports} {argv}; echo EXIT=$? > {shlex.quote(str(log))}; sleep 30"


def wait_exit(log: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return log.read_text().strip() if log.exists() else "(still running)"
