"""What happens in a session, as plain dataclasses.

The loop emits these to an injected sink (the UIs render them) and to the transcript (every
event but TextDelta is one JSONL line). Replaying the transcript's events through
`SessionState.apply` rebuilds the session exactly, so the loop and resume share one code path.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from cuda_agent_cli.harness_result import HarnessResult


@dataclass
class Event:
    kind: ClassVar[str] = "event"
    persist: ClassVar[bool] = True  # written to the transcript
    durable: ClassVar[bool] = False  # fsynced at once (covers every line before it too)


@dataclass
class SessionStarted(Event):
    kind: ClassVar[str] = "session_started"
    durable: ClassVar[bool] = True
    session_id: str
    target: str
    model: str
    workspace: str | None
    settings: dict[str, Any]
    system_prompt: str
    created: float = field(default_factory=time.time)


@dataclass
class Resumed(Event):
    kind: ClassVar[str] = "resumed"
    model: str
    turns: int
    cost_usd: float


@dataclass
class UserMessage(Event):
    kind: ClassVar[str] = "user_message"
    content: str


@dataclass
class TextDelta(Event):
    """A piece of assistant text as it streams; for the UIs only (never written)."""

    kind: ClassVar[str] = "text_delta"
    persist: ClassVar[bool] = False
    text: str


@dataclass
class AssistantMessage(Event):
    kind: ClassVar[str] = "assistant_message"
    durable: ClassVar[bool] = True  # a paid turn: never lose it
    turn: int
    content: str | None
    tool_calls: list[dict[str, Any]]  # {"id", "name", "arguments", "error"}
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


@dataclass
class ToolStarted(Event):
    kind: ClassVar[str] = "tool_started"
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ToolFinished(Event):
    kind: ClassVar[str] = "tool_finished"
    call_id: str
    name: str
    output: str  # exactly what the model is shown
    is_error: bool
    # What the transcript keeps of the tool's data: a host tool's harness result as its JSON
    # object (the HarnessResultEvent after it carries the result itself).
    data: dict[str, Any] | None = None
    duration_s: float = 0.0


@dataclass
class ShellCommand(Event):
    """A command the user ran from the chat's prompt (`!cmd`) in the agent's sandbox, with its
    output: shown and kept in the transcript, never part of what the model is sent."""

    kind: ClassVar[str] = "shell_command"
    command: str
    output: str
    is_error: bool
    duration_s: float = 0.0


@dataclass
class HarnessResultEvent(Event):
    kind: ClassVar[str] = "harness_result"
    call_id: str
    tool: str
    turn: int
    result: HarnessResult  # as its record keeps it (HarnessResult.as_recorded); a line holds its JSON object
    best: bool  # the best measured candidate so far (reward, then speedup)
    snapshot: str | None = None  # where the candidate files were copied when best
    sources: str | None = None  # workspace.candidate_digest of the files judged: which kernel it was


@dataclass
class CostUpdate(Event):
    kind: ClassVar[str] = "cost"
    turn_cost_usd: float
    total_cost_usd: float
    prompt_tokens: int
    completion_tokens: int
    context_tokens: int
    context_budget: int


@dataclass
class Retrying(Event):
    kind: ClassVar[str] = "retrying"
    attempt: int
    wait_s: float
    reason: str


@dataclass
class Compacted(Event):
    """messages[start:end] were replaced by one summary message."""

    kind: ClassVar[str] = "compacted"
    durable: ClassVar[bool] = True
    start: int
    end: int
    summary: str
    tokens_before: int
    tokens_after: int


@dataclass
class Stopped(Event):
    kind: ClassVar[str] = "stopped"
    durable: ClassVar[bool] = True
    reason: str  # done | max_turns | max_cost | timeout | interrupted | error
    detail: str = ""
    turns: int = 0
    cost_usd: float = 0.0


EventSink = Callable[[Event], None]

EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        SessionStarted,
        Resumed,
        UserMessage,
        TextDelta,
        AssistantMessage,
        ToolStarted,
        ToolFinished,
        ShellCommand,
        HarnessResultEvent,
        CostUpdate,
        Retrying,
        Compacted,
        Stopped,
    )
}
_FIELDS = {kind: {f.name for f in dataclasses.fields(cls)} for kind, cls in EVENT_TYPES.items()}


def event_to_dict(event: Event) -> dict[str, Any]:
    """The transcript line of an event: a harness result as its JSON object."""
    d: dict[str, Any] = {"event": event.kind, "t": round(time.time(), 3)}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        d[f.name] = value.to_json() if isinstance(value, HarnessResult) else value
    return d


def event_from_dict(d: dict[str, Any]) -> Event | None:
    """The event a transcript line holds; None for a line of a kind this version does not know,
    or a harness result it cannot read back."""
    kind = d.get("event")
    if not isinstance(kind, str) or kind not in EVENT_TYPES:
        return None
    fields = {k: v for k, v in d.items() if k in _FIELDS[kind]}
    if kind == HarnessResultEvent.kind:
        try:
            fields["result"] = HarnessResult.from_json(fields["result"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
    return EVENT_TYPES[kind](**fields)
