"""Permission modes for work over a user's repository.

- ask (default): every file write and every shell command needs a yes; "always" says yes
  for the rest of the session (for Bash: to commands starting with the same program).
- accept-edits: file writes go ahead, shell commands still ask.
- yolo: nothing asks.
Reads, searches and the harness tools never ask.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from cuda_agent_cli.actions.paths import PathRefused, check_write, display, resolve
from cuda_agent_cli.actions.toolbox import Action, ActionContext
from cuda_agent_cli.errors import BadInput

Answer = Literal["yes", "no", "always"]
MODES = ("ask", "accept-edits", "yolo")


def command_program(command: str) -> str:
    """The program a command line starts with: what "always allow" remembers for Bash."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for w in words:
        if "=" in w.split("/")[0] and not w.startswith("="):
            continue  # leading VAR=value assignments
        return w
    return command.strip()


def describe_call(action: Action, args: dict[str, Any], ctx: ActionContext) -> str:
    """One line saying what the call will do, for the prompt."""
    if action.name == "Bash":
        extra = " (in the background)" if args.get("run_in_background") else ""
        return f"Run `{args.get('command', '')}`{extra}"
    path = args.get("file_path") or args.get("notebook_path")
    if path:
        try:
            shown = display(resolve(path, ctx.root), ctx.root)
        except Exception:
            shown = path
        return f"{action.name} {shown}"
    return action.name


@dataclass
class Permissions:
    """Decides, per call, whether the user must agree; `confirm` asks them."""

    mode: str = "ask"
    confirm: Callable[[str], Answer] | None = None
    always_writes: bool = False
    always_programs: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise BadInput(f"unknown permission mode {self.mode!r}", f"use one of {', '.join(MODES)}")

    def needs_asking(self, action: Action, args: dict[str, Any]) -> bool:
        if self.mode == "yolo":
            return False
        if action.runs_commands:
            return command_program(args.get("command", "")) not in self.always_programs
        if action.writes:
            return self.mode == "ask" and not self.always_writes
        return False

    def should_ask(self, action: Action, args: dict[str, Any], ctx: ActionContext) -> bool:
        """Whether this call needs the user's word: not when the mode allows it, nor when the
        tool will refuse the path anyway (asking first would be pointless)."""
        if not self.needs_asking(action, args):
            return False
        path = args.get("file_path") or args.get("notebook_path")
        if path and not action.runs_commands:
            try:
                check_write(path, ctx.policy)
            except PathRefused:
                return False
        return True

    def check(self, action: Action, args: dict[str, Any], ctx: ActionContext) -> str | None:
        if not self.should_ask(action, args, ctx):
            return None
        what = describe_call(action, args, ctx)
        if self.confirm is None:
            return f"Not permitted: {what} needs the user's approval and nobody can give it here"
        answer = self.confirm(what)
        if answer == "always":
            if action.runs_commands:
                self.always_programs.add(command_program(args.get("command", "")))
            else:
                self.always_writes = True
            return None
        if answer == "yes":
            return None
        return f"The user declined: {what}. Ask them what to do instead, or try another approach."
