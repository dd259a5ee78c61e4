"""A scripted model for tests: returns prepared turns and records what it was sent."""

from __future__ import annotations

import copy
from typing import Any, Callable, Sequence, Union

from cuda_agent_cli.model.port import AssistantTurn, TextCallback, ToolCall, Usage, approx_tokens

Step = Union[AssistantTurn, BaseException, Callable[[Sequence[dict[str, Any]]], AssistantTurn]]


def turn(
    content: str | None = None,
    *calls: tuple[str, dict[str, Any]],
    cost: float = 0.0,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
) -> AssistantTurn:
    """Shorthand: turn("thinking", ("Read", {"file_path": "model.py"}))."""
    return AssistantTurn(
        content=content,
        tool_calls=[ToolCall(id="", name=n, arguments=a) for n, a in calls],
        usage=Usage(prompt_tokens, completion_tokens),
        cost_usd=cost,
    )


class ScriptedModel:
    """Each complete() takes the next step: a turn, an exception to raise, or a function of the
    messages. After the script, it answers `final_text` with no tool call."""

    def __init__(
        self,
        steps: Sequence[Step],
        name: str = "scripted",
        context_window: int | None = None,
        final_text: str = "Done.",
    ) -> None:
        self.steps = list(steps)
        self.name = name
        self.context_window = context_window
        self.final_text = final_text
        self.calls: list[list[dict[str, Any]]] = []
        self._ids = 0

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback | None = None,
    ) -> AssistantTurn:
        self.calls.append(copy.deepcopy(list(messages)))
        step: Step = self.steps.pop(0) if self.steps else AssistantTurn(content=self.final_text)
        if isinstance(step, BaseException):
            raise step
        result = step(messages) if callable(step) else copy.deepcopy(step)
        for c in result.tool_calls:
            if not c.id:
                self._ids += 1
                c.id = f"scripted_{self._ids}"
        if on_text and result.content:
            on_text(result.content)
        return result

    def count_tokens(self, messages: Sequence[dict[str, Any]]) -> int:
        return approx_tokens(messages)
