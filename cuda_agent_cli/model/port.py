"""The model seam: what the loop sends to a model and what comes back.

Messages are OpenAI chat dicts (`role`, `content`, `tool_calls`, `tool_call_id`); every model
implementation translates from this one canonical form, so the loop and the transcript never
care which provider or tool-call protocol is underneath.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

TextCallback = Callable[[str], None]
RetryCallback = Callable[[int, float, str], None]  # (attempt, wait seconds, reason)


@dataclass
class ToolCall:
    """One call the model asked for. `error` is set when the call could not be understood
    (malformed JSON, unknown tool, bad arguments); the loop then answers it with that error
    instead of running anything."""

    id: str
    name: str
    arguments: dict[str, Any]
    error: str | None = None

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class AssistantTurn:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0

    def to_message(self) -> dict[str, Any]:
        """The canonical assistant message that goes back into the conversation."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_message() for c in self.tool_calls]
        return msg


@runtime_checkable
class ModelPort(Protocol):
    """Anything the loop can drive. `name` is what transcripts record; `context_window` is the
    model's own input limit when known (None: unknown)."""

    name: str
    context_window: int | None

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback | None = None,
    ) -> AssistantTurn: ...

    def count_tokens(self, messages: Sequence[dict[str, Any]]) -> int: ...


def message_chars(message: dict[str, Any]) -> int:
    """Characters of a message that reach the model: content plus tool-call arguments."""
    n = len(message.get("content") or "") if isinstance(message.get("content"), str) else 0
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        n += len(fn.get("name") or "") + len(fn.get("arguments") or "")
    return n + 4  # role and framing


def approx_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """A cheap token estimate (about four characters a token) for models without a tokenizer."""
    return sum(message_chars(m) for m in messages) // 4
