"""The agent's tools (DESIGN §4): Claude-Code-compatible schemas over the sandbox and harness.

    sandbox = open_sandbox(SandboxPolicy.optimize(ws.root, list(ws.locked)), allow_unsafe)
    toolbox = make_toolbox(ActionContext(sandbox, harness=harness, permissions=None))
    toolbox.schemas()                       # for the model
    toolbox.call("Read", {"file_path": "model.py"})  # -> ToolResult, never raises
    toolbox.close()                         # kills background shells
"""

from __future__ import annotations

from typing import Iterable

from cuda_agent_cli.actions.base import Action, ActionContext, ToolResult, Toolbox
from cuda_agent_cli.actions.files import Edit, MultiEdit, Read, Write
from cuda_agent_cli.actions.host import HOST_TOOLS, Compile, HarnessPort, Profile, Verify
from cuda_agent_cli.actions.notebook import NotebookEdit
from cuda_agent_cli.actions.permissions import Permissions
from cuda_agent_cli.actions.search import Glob, Grep
from cuda_agent_cli.actions.shell import Bash, BashOutput, KillBash

__all__ = [
    "Action", "ActionContext", "ToolResult", "Toolbox", "HarnessPort", "Permissions",
    "Bash", "BashOutput", "KillBash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep",
    "NotebookEdit", "Compile", "Verify", "Profile", "make_toolbox", "standard_actions",
]


def standard_actions(host_tools: bool = True) -> list[Action]:
    """One instance of every tool, in the order the model sees them."""
    actions: list[Action] = [Bash(), BashOutput(), KillBash(), Read(), Write(), Edit(),
                             MultiEdit(), Glob(), Grep(), NotebookEdit()]
    if host_tools:
        actions += [cls() for cls in HOST_TOOLS]
    return actions


def make_toolbox(ctx: ActionContext, extra: Iterable[Action] = ()) -> Toolbox:
    """The standard toolbox; host tools are included when the context has a harness."""
    return Toolbox([*standard_actions(ctx.harness is not None), *extra], ctx)
