"""The agent's tools (docs/architecture.md, "Contracts"): Claude-Code-compatible schemas over the sandbox and harness.

sandbox = open_sandbox(SandboxPolicy.optimize(ws.root, list(ws.locked)), allow_unsafe)
toolbox = make_toolbox(ActionContext(sandbox, harness=harness, permissions=None))
toolbox.schemas()                       # for the model
toolbox.call("Read", {"file_path": "model.py"})  # -> ToolResult, never raises
toolbox.close()                         # kills background shells
"""

from __future__ import annotations

from typing import Iterable

from cuda_agent_cli.actions.files import Edit, MultiEdit, Read, Write
from cuda_agent_cli.actions.host import HOST_TOOLS, Compile, HarnessPort, Profile, Verify
from cuda_agent_cli.actions.notebook import NotebookEdit
from cuda_agent_cli.actions.permissions import Permissions
from cuda_agent_cli.actions.search import Glob, Grep
from cuda_agent_cli.actions.shell import Bash, BashOutput, KillBash
from cuda_agent_cli.actions.toolbox import Action, ActionContext, Toolbox, ToolResult

__all__ = [
    "Action",
    "ActionContext",
    "ToolResult",
    "Toolbox",
    "HarnessPort",
    "Permissions",
    "Bash",
    "BashOutput",
    "KillBash",
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "Glob",
    "Grep",
    "NotebookEdit",
    "Compile",
    "Verify",
    "Profile",
    "make_toolbox",
    "standard_actions",
]


def standard_actions(host_tools: bool = True) -> list[Action]:
    """One instance of every tool, in the order the model sees them."""
    actions: list[Action] = [
        Bash(),
        BashOutput(),
        KillBash(),
        Read(),
        Write(),
        Edit(),
        MultiEdit(),
        Glob(),
        Grep(),
        NotebookEdit(),
    ]
    if host_tools:
        actions += [cls() for cls in HOST_TOOLS]
    return actions


SHELL_TOOLS = frozenset({"Bash", "BashOutput", "KillBash"})


def make_toolbox(ctx: ActionContext, extra: Iterable[Action] = (), shell: bool = True) -> Toolbox:
    """The standard toolbox; host tools are included when the context has a harness.

    `shell=False` leaves out Bash, BashOutput and KillBash: for a session whose commands are
    known in advance to need no shell (the bundled demo) on a machine that cannot sandbox one.
    """
    actions = [a for a in standard_actions(ctx.harness is not None) if shell or a.name not in SHELL_TOOLS]
    return Toolbox([*actions, *extra], ctx)
