"""Sessions: state rebuilt from the transcript, and the session store under the user data dir.

`SessionState.apply(event)` is the only way state changes, both while the loop runs and when a
transcript is read back, so a resumed session is exactly the one that was recorded.
"""

from __future__ import annotations

import datetime as _dt
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent_cli.agent.events import (
    AssistantMessage,
    Compacted,
    Event,
    HarnessResultEvent,
    Resumed,
    SessionStarted,
    Stopped,
    ToolFinished,
    UserMessage,
)
from cuda_agent_cli.agent.transcript import TRANSCRIPT_NAME, read_events
from cuda_agent_cli.config import user_data_dir
from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.harness_result import HarnessResult

Score = tuple[float, float, float]


class SessionNotFound(BadInput):
    """A --resume id that names no stored session."""


def candidate_score(result: HarnessResult) -> Score | None:
    """How good a harness result is: (reward, speedup vs torch.compile, speedup vs eager).

    None when the candidate is not correct. A verified but untimed candidate scores reward 0,
    below any profiled one."""
    if not result.correct:
        return None
    reward = result.reward
    if not isinstance(reward, (int, float)) or reward < 0:
        reward = 0
    timings = result.timings
    return (
        float(reward),
        float(timings.speedup_vs_compile or 0.0) if timings else 0.0,
        float(timings.speedup_vs_eager or 0.0) if timings else 0.0,
    )


@dataclass
class CandidateRecord:
    """The best measured candidate: its harness result and where its files were saved."""

    turn: int
    tool: str
    call_id: str
    result: HarnessResult
    score: Score
    snapshot: str | None

    def to_json(self) -> dict[str, Any]:
        timings = self.result.timings
        return {
            "turn": self.turn,
            "tool": self.tool,
            "reward": self.result.reward,
            "speedup_vs_eager": timings.speedup_vs_eager if timings else None,
            "speedup_vs_compile": timings.speedup_vs_compile if timings else None,
            "snapshot": self.snapshot,
            "result": self.result.to_json(),
        }


@dataclass
class SessionState:
    session_id: str
    session_dir: Path
    meta: dict[str, Any] = field(default_factory=dict)  # target, model, workspace, settings
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    cost_usd: float = 0.0
    best: CandidateRecord | None = None
    # {"turn", "tool", "result": HarnessResult, "sources"} of every harness result, in order.
    harness_results: list[dict[str, Any]] = field(default_factory=list)
    status: str = "new"
    stop_detail: str = ""
    started: bool = False
    created: float | None = None
    updated: float | None = None
    compactions: int = 0

    @property
    def transcript_path(self) -> Path:
        return self.session_dir / TRANSCRIPT_NAME

    @property
    def repository(self) -> str | None:
        """The repository the session was started in: its settings' "repo" (the target's
        repository for optimize, the chat's folder), else, for sessions recorded before the
        settings held it, the repository of the folder task.json says optimize ran in."""
        from cuda_agent_cli.task.target import repository_of

        settings = self.meta.get("settings") or {}
        if settings.get("repo"):
            return str(settings["repo"])
        cwd = _started_in(self.session_dir)
        return str(repository_of(Path(cwd))) if cwd else None

    def in_repository(self, repo: Path) -> bool:
        """Whether the session belongs to `repo` (a `task.target.repository_of` folder)."""
        from cuda_agent_cli.task.target import repository_of

        places = [self.repository, _started_in(self.session_dir)]
        return any(p and repository_of(Path(p)) == repo for p in places)

    @property
    def workspace(self) -> Path | None:
        ws = self.meta.get("workspace")
        return Path(ws) if ws else None

    def unanswered_calls(self) -> list[tuple[str, str]]:
        """(id, name) of tool calls in the last assistant message that have no result yet:
        what a kill or Ctrl-C in the middle of running tools leaves behind."""
        for i in range(len(self.messages) - 1, -1, -1):
            m = self.messages[i]
            if m.get("role") == "assistant":
                answered = {r.get("tool_call_id") for r in self.messages[i + 1 :] if r.get("role") == "tool"}
                return [(c["id"], c["function"]["name"]) for c in m.get("tool_calls") or () if c["id"] not in answered]
        return []

    def apply(self, event: Event) -> None:
        if isinstance(event, SessionStarted):
            self.started = True
            self.created = event.created
            self.meta = {
                "target": event.target,
                "model": event.model,
                "workspace": event.workspace,
                "settings": dict(event.settings),
            }
            self.messages = [{"role": "system", "content": event.system_prompt}]
            self.status = "running"
        elif isinstance(event, UserMessage):
            self.messages.append({"role": "user", "content": event.content})
        elif isinstance(event, AssistantMessage):
            self.turns = max(self.turns, event.turn)
            self.cost_usd += event.cost_usd
            msg: dict[str, Any] = {"role": "assistant", "content": event.content}
            if event.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})},
                    }
                    for c in event.tool_calls
                ]
            self.messages.append(msg)
        elif isinstance(event, ToolFinished):
            self.messages.append({"role": "tool", "tool_call_id": event.call_id, "content": event.output})
        elif isinstance(event, HarnessResultEvent):
            self.harness_results.append(
                {"turn": event.turn, "tool": event.tool, "result": event.result, "sources": event.sources}
            )
            score = candidate_score(event.result)
            if event.best and score is not None:
                self.best = CandidateRecord(event.turn, event.tool, event.call_id, event.result, score, event.snapshot)
        elif isinstance(event, Compacted):
            self.messages[event.start : event.end] = [{"role": "user", "content": event.summary}]
            self.compactions += 1
        elif isinstance(event, Resumed):
            self.status = "running"
            self.meta["model"] = event.model
        elif isinstance(event, Stopped):
            self.status = event.reason
            self.stop_detail = event.detail


# -- the store ----------------------------------------------------------------------------------


def sessions_root(data_dir: Path | None = None) -> Path:
    return (Path(data_dir) if data_dir else user_data_dir()) / "sessions"


def new_session_id() -> str:
    """Sortable by creation time, unique across processes: 20260130-051200-3f9a1c."""
    return _dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def new_session(data_dir: Path | None = None, session_id: str | None = None) -> SessionState:
    """A fresh session with its directory made; run_agent writes its first event."""
    sid = session_id or new_session_id()
    d = sessions_root(data_dir) / sid
    d.mkdir(parents=True, exist_ok=False)
    return SessionState(session_id=sid, session_dir=d)


def load_session_dir(session_dir: Path) -> SessionState:
    state = SessionState(session_id=session_dir.name, session_dir=session_dir)
    path = session_dir / TRANSCRIPT_NAME
    if path.is_file():
        for event in read_events(path):
            state.apply(event)
        state.updated = path.stat().st_mtime
    return state


def load_session(session_id: str, data_dir: Path | None = None) -> SessionState:
    """The session with this id (or a unique prefix of it), rebuilt from its transcript."""
    root = sessions_root(data_dir)
    d = root / session_id
    if not (d / TRANSCRIPT_NAME).is_file():
        matches = [p for p in _session_dirs(root) if p.name.startswith(session_id)] if session_id else []
        if len(matches) != 1:
            what = "matches several sessions" if matches else "is not a stored session"
            raise SessionNotFound(f"session {session_id!r} {what}", "list them with `cuda-agent sessions`")
        d = matches[0]
    state = load_session_dir(d)
    if not state.started:
        raise SessionNotFound(f"session {d.name} has no recorded start", "start a new session instead")
    return state


def resume_session(
    id_or_latest: str | None,
    data_dir: Path | None = None,
    repo: Path | None = None,
    chat: bool | None = None,
) -> SessionState:
    """`--resume ID` (an id or unique prefix) or `--continue` (None or "latest": the most recent
    session; with `repo`, the most recent of that repository; with `chat`, only chat sessions
    (True) or only the others (False))."""
    if id_or_latest is None or id_or_latest in ("", "latest"):
        for d in sorted(_session_dirs(sessions_root(data_dir)), key=_mtime, reverse=True):
            state = load_session_dir(d)
            if chat is not None and is_chat(state) != chat:
                continue
            if repo is None or state.in_repository(repo):
                return state
        kind = "chat session" if chat else "session"
        if repo is None:
            start = "`cuda-agent chat`" if chat else "`cuda-agent optimize TARGET`"
            raise SessionNotFound(f"there is no {kind} to continue", f"start one with {start}")
        raise SessionNotFound(
            f"there is no {kind} of {repo} to continue",
            "`cuda-agent sessions` lists every repository's; pass one with --resume ID",
        )
    return load_session(id_or_latest, data_dir)


def is_chat(state: SessionState) -> bool:
    """A session of `cuda-agent chat` (its settings' command; chat.session.CHAT_COMMAND)."""
    return (state.meta.get("settings") or {}).get("command") == "chat"


# Written by run.settings (task.json) for every optimize session: the folder it ran in.
_TASK_FILE = "task.json"


def _started_in(session_dir: Path) -> str | None:
    try:
        cwd = json.loads((session_dir / _TASK_FILE).read_text()).get("cwd")
    except (OSError, ValueError, AttributeError):
        return None
    return cwd if isinstance(cwd, str) and cwd else None


def _session_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return [p for p in root.iterdir() if (p / TRANSCRIPT_NAME).is_file() and (p / TRANSCRIPT_NAME).stat().st_size]


def _mtime(p: Path) -> float:
    return (p / TRANSCRIPT_NAME).stat().st_mtime


@dataclass
class SessionSummary:
    session_id: str
    created: str
    target: str
    model: str
    status: str
    turns: int
    cost_usd: float
    best_speedup_vs_eager: float | None
    best_speedup_vs_compile: float | None
    best_reward: int | None
    transcript: str
    kind: str = "optimize"  # optimize | chat (the settings' "command")
    repo: str | None = None  # the repository it was started in (SessionState.repository)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize(state: SessionState) -> SessionSummary:
    created = _dt.datetime.fromtimestamp(state.created).isoformat(timespec="seconds") if state.created else ""
    timings = state.best.result.timings if state.best else None
    status = state.status
    if status == "running":
        status = "unfinished"  # killed, or still running in another process
    return SessionSummary(
        session_id=state.session_id,
        created=created,
        target=str(state.meta.get("target") or ""),
        model=str(state.meta.get("model") or ""),
        status=status,
        turns=state.turns,
        cost_usd=round(state.cost_usd, 6),
        best_speedup_vs_eager=timings.speedup_vs_eager if timings else None,
        best_speedup_vs_compile=timings.speedup_vs_compile if timings else None,
        best_reward=state.best.result.reward if state.best else None,
        transcript=str(state.transcript_path),
        kind=str((state.meta.get("settings") or {}).get("command") or "optimize"),
        repo=state.repository,
    )


def list_sessions(data_dir: Path | None = None) -> list[SessionSummary]:
    """Every stored session, newest first."""
    dirs = sorted(_session_dirs(sessions_root(data_dir)), key=_mtime, reverse=True)
    return [summarize(load_session_dir(d)) for d in dirs]
