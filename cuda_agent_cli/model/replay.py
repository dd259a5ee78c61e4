"""`--model replay:FILE.jsonl`: recorded assistant turns played back in order (docs/architecture.md, "Contracts").

One JSON object a line: `{"content": str|null, "tool_calls": [{"name": str, "arguments": {...}}]}`.
Tools and the harness run for real; only the model's side is recorded. When the file runs out
the model answers with no tool call, which ends the session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from cuda_agent_cli.errors import ModelConfigError
from cuda_agent_cli.model.port import AssistantTurn, TextCallback, ToolCall, approx_tokens

EXHAUSTED_TEXT = "(end of the recorded session)"


def parse_replay_line(line: str, where: str) -> AssistantTurn:
    """One recorded turn; `where` ("FILE:LINE") names the culprit in the error."""
    hint = 'each line must be {"content": str|null, "tool_calls": [{"name": str, "arguments": {...}}]}'
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ModelConfigError(f"{where}: not valid JSON ({exc.msg})", hint) from None
    if not isinstance(obj, dict):
        raise ModelConfigError(f"{where}: expected a JSON object, got {type(obj).__name__}", hint)
    content = obj.get("content")
    if content is not None and not isinstance(content, str):
        raise ModelConfigError(f'{where}: "content" must be a string or null', hint)
    raw_calls = obj.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ModelConfigError(f'{where}: "tool_calls" must be a list', hint)
    calls: list[ToolCall] = []
    for i, c in enumerate(raw_calls):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
            raise ModelConfigError(f'{where}: tool_calls[{i}] needs a string "name"', hint)
        args = c.get("arguments", {})
        if not isinstance(args, dict):
            raise ModelConfigError(f"{where}: tool_calls[{i}].arguments must be an object", hint)
        calls.append(ToolCall(id=str(c.get("id") or ""), name=c["name"], arguments=args))
    return AssistantTurn(content=content, tool_calls=calls)


def load_replay(path: Path) -> list[AssistantTurn]:
    """Every turn of a replay file, validated up front so a bad line fails before any work."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelConfigError(f"replay file {path} does not exist", "pass --model replay:PATH/TO/FILE.jsonl") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelConfigError(f"replay file {path} cannot be read: {exc}", "pass a UTF-8 JSONL file") from None
    turns = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            turns.append(parse_replay_line(line, f"{path}:{lineno}"))
    return turns


class ReplayModel:
    """Plays recorded turns; `position` is how many have been played (resume skips ahead)."""

    context_window: int | None = None

    def __init__(self, turns: Sequence[AssistantTurn], name: str = "replay", position: int = 0) -> None:
        self.turns = list(turns)
        self.name = name
        self.position = position
        self._ids = 0

    @classmethod
    def from_file(cls, path: str | Path) -> "ReplayModel":
        p = Path(path).expanduser()
        return cls(load_replay(p), name=f"replay:{p}")

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback | None = None,
    ) -> AssistantTurn:
        if self.position >= len(self.turns):
            turn = AssistantTurn(content=EXHAUSTED_TEXT)
        else:
            rec = self.turns[self.position]
            calls = []
            for c in rec.tool_calls:
                self._ids += 1
                calls.append(ToolCall(c.id or f"replay_{self.position}_{self._ids}", c.name, dict(c.arguments)))
            turn = AssistantTurn(content=rec.content, tool_calls=calls)
        self.position += 1
        if on_text and turn.content:
            on_text(turn.content)
        return turn

    def count_tokens(self, messages: Sequence[dict[str, Any]]) -> int:
        return approx_tokens(messages)

    def resume_at(self, assistant_turns: int) -> None:
        """Skip the turns already played in the session being resumed."""
        self.position = assistant_turns
