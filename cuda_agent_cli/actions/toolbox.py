"""What every tool is, the context it runs in, and the Toolbox the agent loop calls.

`Toolbox.call` never raises for anything the model did: unknown tools, bad arguments, refused
paths, declined permissions and failing commands all come back as a ToolResult with
`is_error=True` and a message that says what to change.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from cuda_agent_cli.actions.paths import PathRefused
from cuda_agent_cli.errors import CudaAgentError
from cuda_agent_cli.harness_result import HarnessResult
from cuda_agent_cli.model.arguments import Problem, argument_problems, as_declared
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy

OUTPUT_LIMIT = 30_000


@dataclass
class ToolResult:
    """What a tool hands back: text for the model, structured data for UIs and logs, and, from
    Compile, Verify and Profile, the harness's result."""

    output: str
    is_error: bool = False
    data: dict[str, Any] | None = None
    harness_result: HarnessResult | None = None


def error(message: str, **data: Any) -> ToolResult:
    return ToolResult(message, True, data or None)


class Action(Protocol):
    """One tool. `writes`: changes files; `runs_commands`: executes code in the sandbox."""

    name: str
    description: str
    input_schema: dict[str, Any]
    writes: bool
    runs_commands: bool

    def run(self, args: dict[str, Any], ctx: "ActionContext") -> ToolResult: ...


class PermissionGate(Protocol):
    def check(self, action: Action, args: dict[str, Any], ctx: "ActionContext") -> str | None:
        """None when the call may proceed, else the reason it may not."""


@dataclass
class ActionContext:
    """Everything tools share in one session."""

    sandbox: Sandbox
    harness: Any = None  # a HarnessPort for Compile/Verify/Profile, None where there is none
    permissions: PermissionGate | None = None
    shells: Any = None  # shell.ShellManager, made on first use
    _counter: Iterable[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def policy(self) -> SandboxPolicy:
        return self.sandbox.policy

    @property
    def root(self) -> Path:
        return self.sandbox.policy.root

    @property
    def scratch_dir(self) -> Path:
        return self.sandbox.policy.scratch_dir

    def next_id(self) -> int:
        return next(self._counter)  # type: ignore[call-overload]

    def save_full_output(self, tool: str, text: str) -> Path:
        """Keep a capped output whole in the scratch dir, where Read can reach it."""
        from cuda_agent_cli.actions.paths import write_file

        out_dir = self.scratch_dir / "tool-output"
        target = out_dir / f"{tool.lower()}-{self.next_id()}.txt"
        write_file(target, text.encode("utf-8", "replace"), self.policy)
        return target


def cap_output(text: str, saved_to: Callable[[], Path] | None = None, limit: int = OUTPUT_LIMIT) -> str:
    """At most `limit` characters: head and tail kept, the middle cut with a clear marker."""
    if len(text) <= limit:
        return text
    where = ""
    if saved_to is not None:
        try:
            where = f"; the full output is saved in {saved_to()} (use Read with offset/limit)"
        except (OSError, PathRefused) as exc:
            where = f"; it could not be saved ({exc})"
    marker_room = 400
    half = (limit - marker_room) // 2
    cut = len(text) - 2 * half
    marker = f"\n\n[... {cut} characters cut from the middle of {len(text)}{where} ...]\n\n"
    return text[:half] + marker + text[-half:]


# --- argument validation ---------------------------------------------------------------------


def validate(args: Any, schema: dict[str, Any]) -> list[str]:
    """Problems with `args` against the tool's schema (`model.arguments`, the one validator), one
    line each."""
    return [_line(p) for p in argument_problems(args, schema)]


def _line(p: Problem) -> str:
    if p.kind == "required":
        return f"missing required parameter `{p.name}`"
    if p.kind == "unknown":
        return f"unknown parameter `{p.name}` (expected: {', '.join(p.expected)})"
    label = _label(p.path)
    if p.kind == "type":
        kinds = [p.expected] if isinstance(p.expected, str) else list(p.expected)
        article = "an" if kinds[0][0] in "aeiou" else "a"
        return f"{label} must be {article} {' or '.join(kinds)}, got {type(p.value).__name__}"
    if p.kind == "enum":
        return f"{label} must be one of {', '.join(map(repr, p.expected))}, got {p.value!r}"
    if p.kind == "minimum":
        return f"{label} must be at least {p.expected}, got {p.value}"
    if p.kind == "maximum":
        return f"{label} must be at most {p.expected}, got {p.value}"
    return f"{label} needs at least {p.expected} item(s)"  # min_items


def _label(path: tuple[str | int, ...]) -> str:
    """`file_path`, `edits`[0].new_string, or "arguments" for the arguments themselves."""
    if not path:
        return "arguments"
    out = f"`{path[0]}`"
    for step in path[1:]:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


class Toolbox:
    """The set of tools one agent session has, bound to its context."""

    def __init__(self, actions: Iterable[Action], ctx: ActionContext) -> None:
        self.ctx = ctx
        self.actions: dict[str, Action] = {}
        for a in actions:
            if a.name in self.actions:
                raise ValueError(f"two tools are named {a.name}")
            self.actions[a.name] = a

    def names(self) -> list[str]:
        return list(self.actions)

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function-calling format, which litellm translates for every provider."""
        return [
            {
                "type": "function",
                "function": {"name": a.name, "description": a.description, "parameters": a.input_schema},
            }
            for a in self.actions.values()
        ]

    def call(self, name: str, args: Any) -> ToolResult:
        action = self.actions.get(name)
        if action is None:
            return error(f"unknown tool `{name}`; available tools: {', '.join(self.actions)}")
        if args is None:
            args = {}
        problems = validate(args, action.input_schema)
        if problems:
            return error(f"{name}: invalid arguments: " + "; ".join(problems))
        args = as_declared(args, action.input_schema)
        if self.ctx.permissions is not None:
            refusal = self.ctx.permissions.check(action, args, self.ctx)
            if refusal:
                return error(refusal)
        try:
            result = action.run(args, self.ctx)
        except PathRefused as exc:
            return error(str(exc))
        except CudaAgentError as exc:
            return error(exc.one_line())
        except re.error as exc:
            return error(f"{name}: invalid regular expression: {exc}")
        except UnicodeDecodeError:
            return error(f"{name}: the file is not UTF-8 text")
        except ValueError as exc:  # tools raise it with a message written for the model
            return error(f"{name}: {exc}")
        except OSError as exc:
            what = f" {exc.filename}" if exc.filename else ""
            return error(f"{name}: {exc.strerror or exc}{what}")
        except Exception as exc:  # a tool bug must not end the session; the model is told
            return error(f"{name} failed unexpectedly: {type(exc).__name__}: {exc}")
        if len(result.output) > OUTPUT_LIMIT:
            text = result.output
            result.output = cap_output(text, lambda: self.ctx.save_full_output(name, text))
        return result

    def close(self) -> None:
        """Kill every background shell still running."""
        if self.ctx.shells is not None:
            self.ctx.shells.kill_all()
