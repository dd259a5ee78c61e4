"""A session's settings: the configuration resolved once, and task.json, what `--resume` reads.

A resumed session keeps its target, its inputs, its device and its policy (they made its
workspace, its harness and every result in its transcript): a flag that would change one of
them is refused in one line. Its model, API base and limits may change with a flag; without
one they are the session's own (the "session" layer of `Config.with_session`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cuda_agent_cli.config import Policy
from cuda_agent_cli.errors import BadInput

TASK_FILE = "task.json"  # in the session dir


@dataclass(frozen=True)
class SavedTask:
    """task.json: how to rebuild a session's task and harness on --resume."""

    target: str
    cwd: str
    call: dict[str, Any]  # task/inputs.py call_to_json of the call optimized for
    explicit_inputs: bool  # --inputs or --capture, not the module's get_inputs()
    device: str
    policy: Policy
    model: str | None
    api_base: str | None
    count: int | None = None  # calls of the first signature the command made (--capture)
    more: tuple[dict[str, Any], ...] = ()  # further calls verified at the end: {"call", "count"}

    def calls(self) -> list[tuple[dict[str, Any], int | None]]:
        """Every call of the session, the one optimized for first, with its count."""
        return [(self.call, self.count), *((m["call"], m.get("count")) for m in self.more)]

    def session_layer(self) -> dict[str, Any]:
        """What a resumed session brings to the configuration (see config.Config.with_session)."""
        return {"model": self.model, "api_base": self.api_base, "device": self.device, "policy": self.policy}


def save_task(session_dir: Path, saved: SavedTask) -> None:
    (session_dir / TASK_FILE).write_text(json.dumps(asdict(saved), indent=2))


def load_task(session_dir: Path) -> SavedTask:
    path = session_dir / TASK_FILE
    if not path.is_file():
        raise BadInput(f"session {session_dir.name} was not started by optimize", "resume it with `cuda-agent chat`")
    data = json.loads(path.read_text())
    return SavedTask(
        target=data["target"],
        cwd=data["cwd"],
        call=data["call"],
        explicit_inputs=bool(data["explicit_inputs"]),
        device=data["device"],
        policy=data["policy"],
        model=data.get("model"),
        api_base=data.get("api_base"),
        count=data.get("count"),
        more=tuple(data.get("more") or ()),
    )


def refuse_changes_on_resume(
    session_id: str,
    saved: SavedTask,
    *,
    device: str | None,
    policy: str | None,
    inputs: str | None,
    capture: str | None,
) -> None:
    """--resume with a flag that would change what the session was started with: one line, exit 2."""
    changed: list[str] = []
    if device is not None and device != saved.device:
        changed.append(f"--device {device}")
    if policy is not None and policy != saved.policy:
        changed.append(f"--policy {policy}")
    changed += [flag for flag, value in (("--inputs", inputs), ("--capture", capture)) if value is not None]
    if changed:
        raise BadInput(
            f"{' and '.join(changed)} cannot change resumed session {session_id}, which runs "
            f"{saved.target} on {saved.device} with policy {saved.policy}",
            "drop the flag to continue it as it is, or start a new session with it",
        )
