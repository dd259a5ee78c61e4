"""Slash commands of the chat: the table (name, usage, one-line description, whether it may run
while the agent works), the parsing of a typed line, and of `/optimize`'s arguments. Pure: the
view holds a handler for each row (tui/slash.py).
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass

from cuda_agent_cli.errors import BadInput


@dataclass(frozen=True)
class SlashCommand:
    name: str  # without the slash
    usage: str  # arguments, shown in /help and the completion popup
    description: str
    while_busy: bool  # may run while the agent is working


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("help", "", "List the commands and keys", True),
    SlashCommand("quit", "", "Save the session and leave", True),
    SlashCommand("cost", "", "Tokens and money spent in this session", True),
    SlashCommand("context", "", "How much of the model's context window is used", True),
    SlashCommand("model", "[NAME]", "Show the model, or switch to NAME for the next turns", False),
    SlashCommand("mode", "[ask|accept-edits|yolo]", "Show or change the permission mode", True),
    SlashCommand("clear", "", "Clear the conversation on screen (the transcript keeps it)", True),
    SlashCommand("diff", "", "Show what this session changed in the repository", True),
    SlashCommand("verify", "", "Verify the current candidate of the last /optimize again", False),
    SlashCommand("profile", "", "Verify and time the current candidate of the last /optimize", False),
    SlashCommand("sessions", "", "List stored sessions", True),
    SlashCommand("resume", "ID", "Open a stored chat session (conversation and ledger)", False),
    SlashCommand("export", "[FILE]", "Save the conversation as Markdown", True),
    SlashCommand("compact", "", "Summarize older turns to free context", False),
    SlashCommand("undo", "", "Revert the last change applied in this session", False),
    SlashCommand(
        "optimize",
        'FILE::Class [--inputs SPEC | --capture "CMD"]',
        "Write, verify and time a kernel for the calls given or captured from CMD, then review it",
        False,
    ),
    SlashCommand("ledger", "", "Show or hide the kernel ledger (also Ctrl+L)", True),
)

BY_NAME = {c.name: c for c in COMMANDS}


@dataclass(frozen=True)
class ParsedCommand:
    command: SlashCommand
    args: list[str]
    raw_args: str


class UnknownCommand(ValueError):
    """A slash command nobody knows; `suggestion` is the closest known one, if any."""

    def __init__(self, name: str, suggestion: str | None) -> None:
        hint = f" — did you mean /{suggestion}?" if suggestion else " — /help lists the commands"
        super().__init__(f"unknown command /{name}{hint}")
        self.name = name
        self.suggestion = suggestion


def closest(name: str) -> str | None:
    """The known command nearest to `name` (a prefix wins, then spelling)."""
    prefixed = [c.name for c in COMMANDS if c.name.startswith(name)] if name else []
    if len(prefixed) >= 1:
        return prefixed[0]
    near = difflib.get_close_matches(name, list(BY_NAME), n=1, cutoff=0.5)
    return near[0] if near else None


def is_command(line: str) -> bool:
    return line.startswith("/") and not line.startswith("//")


def parse(line: str) -> ParsedCommand:
    """`/name args...` -> ParsedCommand; UnknownCommand for a name nobody knows."""
    body = line.strip()[1:]
    name, _, rest = body.partition(" ")
    name = name.strip().lower()
    cmd = BY_NAME.get(name)
    if cmd is None:
        raise UnknownCommand(name, closest(name))
    try:
        args = shlex.split(rest)
    except ValueError:
        args = rest.split()
    return ParsedCommand(cmd, args, rest.strip())


def completions(prefix: str) -> list[SlashCommand]:
    """Commands whose name starts with what follows the slash in `prefix`."""
    typed = prefix[1:].split(" ", 1)[0].lower() if prefix.startswith("/") else ""
    return [c for c in COMMANDS if c.name.startswith(typed)]


OPTIMIZE_FLAGS = ("inputs", "capture", "device", "policy")
OPTIMIZE_USAGE = '/optimize path/to/file.py::ClassName [--inputs SPEC | --capture "CMD"]'


def parse_optimize_args(args: list[str]) -> dict[str, str | None]:
    """`FILE::Class [--inputs SPEC | --capture CMD] [--device D] [--policy P]` -> fields of an
    OptimizeRequest."""
    out: dict[str, str | None] = {"target": None, **{k: None for k in OPTIMIZE_FLAGS}}
    known = "use --inputs, --capture, --device or --policy"
    i = 0
    while i < len(args):
        a = args[i]
        key = a[2:] if a.startswith("--") else None
        if key and "=" in key:
            key, value = key.split("=", 1)
            if key not in OPTIMIZE_FLAGS:
                raise BadInput(f"/optimize does not know --{key}", known)
            out[key] = value
        elif key:
            if key not in OPTIMIZE_FLAGS:
                raise BadInput(f"/optimize does not know --{key}", known)
            if i + 1 >= len(args):
                raise BadInput(f"--{key} needs a value", f"/optimize FILE::Class --{key} VALUE")
            out[key] = args[i + 1]
            i += 1
        elif out["target"] is None:
            out["target"] = a
        else:
            raise BadInput(f"unexpected argument {a!r}", 'quote an --inputs spec or a --capture "CMD" that has spaces')
        i += 1
    if not out["target"]:
        raise BadInput("/optimize needs a target", OPTIMIZE_USAGE)
    if out["inputs"] and out["capture"]:
        # As `cuda-agent optimize`: both say which calls to optimize for.
        raise BadInput("--inputs and --capture both say which calls to optimize for", "give one of them, not both")
    return out
