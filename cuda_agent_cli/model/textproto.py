"""The text tool-call protocol, for models without native tool calling.

The tools are described in the system prompt and the model writes calls as
`<tool_call>{"name": "Read", "arguments": {"file_path": "model.py"}}</tool_call>`. Results go back
as user messages wrapped in `<tool_result>`. Everything here is pure: parsing, schema validation
and the translation of the canonical (OpenAI-format) conversation into plain text turns.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Sequence

from cuda_agent_cli.model.arguments import Problem, argument_problems
from cuda_agent_cli.model.port import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def _new_id() -> str:
    return "call_" + uuid.uuid4().hex[:12]


def tool_index(tools: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """name -> JSON schema of its parameters, from OpenAI function-tool entries."""
    out: dict[str, dict[str, Any]] = {}
    for t in tools:
        fn = t.get("function", t)
        out[str(fn.get("name"))] = fn.get("parameters") or {"type": "object", "properties": {}}
    return out


def validate_arguments(name: str, args: Any, tools: dict[str, dict[str, Any]]) -> str | None:
    """None when the call fits its tool's schema, else one precise sentence for the model."""
    if name not in tools:
        known = ", ".join(sorted(tools)) or "(none)"
        return f"Unknown tool {name!r}. Available tools: {known}."
    if not isinstance(args, dict):
        return f"{name}: arguments must be a JSON object, got {type(args).__name__}."
    found = argument_problems(args, tools[name])
    if not found:
        return None
    missing = [p.dotted() for p in found if p.kind == "required"]
    if missing:
        return f"{name}: missing required argument(s) {', '.join(missing)}."
    extra = [p for p in found if p.kind == "unknown"]
    if extra:
        allowed = ", ".join(extra[0].expected) or "(none)"
        return f"{name}: unknown argument(s) {', '.join(p.dotted() for p in extra)}; allowed: {allowed}."
    return f"{name}: {_sentence(found[0])}."


def _sentence(p: Problem) -> str:
    where = f"argument {p.dotted()!r}"
    if p.kind == "type":
        want = p.expected if isinstance(p.expected, str) else " or ".join(p.expected)
        return f"{where} must be {want}, got {type(p.value).__name__} {json.dumps(p.value, default=str)[:60]}"
    if p.kind == "enum":
        return f"{where} must be one of {json.dumps(p.expected)}, got {json.dumps(p.value, default=str)[:60]}"
    if p.kind == "minimum":
        return f"{where} must be at least {p.expected}, got {p.value}"
    if p.kind == "maximum":
        return f"{where} must be at most {p.expected}, got {p.value}"
    return f"{where} needs at least {p.expected} item(s)"  # min_items


def _decode_arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        return json.loads(raw) if raw.strip() else {}
    return raw if raw is not None else {}


def parse_call_json(raw: str, tools: dict[str, dict[str, Any]], call_id: str | None = None) -> ToolCall:
    """One call from its JSON text; a call that cannot be used carries `error` instead."""
    cid = call_id or _new_id()
    body = _FENCE.sub("", raw.strip())
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        return ToolCall(
            cid,
            "?",
            {},
            error=f"Malformed tool call: not valid JSON ({exc.msg} at char {exc.pos}). "
            f'Write exactly {OPEN}{{"name": "<tool>", "arguments": {{...}}}}{CLOSE}.',
        )
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return ToolCall(
            cid,
            "?",
            {},
            error='Malformed tool call: expected a JSON object with a string "name" and an object "arguments".',
        )
    name = obj["name"]
    try:
        args = _decode_arguments(obj.get("arguments", obj.get("parameters", {})))
    except json.JSONDecodeError as exc:
        return ToolCall(cid, name, {}, error=f'{name}: "arguments" is a string that is not valid JSON ({exc.msg}).')
    error = validate_arguments(name, args, tools)
    return ToolCall(cid, name, args if isinstance(args, dict) else {}, error=error)


def parse_text_tool_calls(text: str, tools: dict[str, dict[str, Any]]) -> tuple[str, list[ToolCall]]:
    """(the text with the call blocks removed, the calls in order). An unclosed last block is
    still parsed, since models often stop right after the JSON."""
    calls = [parse_call_json(m.group(1), tools) for m in _BLOCK.finditer(text)]
    visible = _BLOCK.sub("", text).strip() if calls else text
    return visible, calls


def render_tool_instructions(tools: Sequence[dict[str, Any]]) -> str:
    """The system-prompt section that teaches the protocol and lists every tool's schema."""
    lines = [
        "# Calling tools",
        "You call tools by writing a block like this, one block per call, and nothing after your last block:",
        f'{OPEN}{{"name": "Read", "arguments": {{"file_path": "model.py"}}}}{CLOSE}',
        'The content must be one JSON object with "name" and "arguments". Results come back in '
        "<tool_result> blocks in the next message. When the work is finished, answer without any tool call.",
        "",
        "Available tools:",
    ]
    for t in tools:
        fn = t.get("function", t)
        params = json.dumps(fn.get("parameters") or {}, separators=(",", ":"))
        lines.append(f"- {fn.get('name')}: {(fn.get('description') or '').strip()}\n  parameters: {params}")
    return "\n".join(lines)


def _call_block(call: dict[str, Any]) -> str:
    fn = call.get("function") or {}
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except ValueError:
        args = fn.get("arguments")
    return OPEN + json.dumps({"name": fn.get("name"), "arguments": args}) + CLOSE


def to_text_messages(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The canonical conversation rewritten for a model that only reads and writes text.

    Tool calls become blocks in the assistant's text, results become user turns, consecutive
    user turns are merged (many chat templates require alternating roles), and the tool
    instructions are appended to the system prompt."""
    out: list[dict[str, Any]] = []
    instructions = render_tool_instructions(tools) if tools else ""
    names = {}
    for m in messages:
        role = m.get("role")
        if role == "system":
            content = (m.get("content") or "") + ("\n\n" + instructions if instructions else "")
            out.append({"role": "system", "content": content})
            instructions = ""
            continue
        if role == "assistant":
            parts = [m.get("content") or ""]
            for call in m.get("tool_calls") or ():
                names[call.get("id")] = (call.get("function") or {}).get("name")
                parts.append(_call_block(call))
            out.append({"role": "assistant", "content": "\n".join(p for p in parts if p)})
            continue
        if role == "tool":
            name = m.get("name") or names.get(m.get("tool_call_id")) or "tool"
            content = f'<tool_result name="{name}">\n{m.get("content") or ""}\n</tool_result>'
        else:
            content = m.get("content") or ""
        if out and out[-1]["role"] == "user":
            out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + content}
        else:
            out.append({"role": "user", "content": content})
    if instructions:  # no system message: the instructions lead the conversation
        out.insert(0, {"role": "system", "content": instructions})
    return out


class CallBlockFilter:
    """Passes streamed text through but holds back `<tool_call>` blocks, so the UI shows the
    model's prose and not the raw JSON of its calls (the calls are shown as tool events)."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink
        self._pending = ""
        self._inside = False

    def feed(self, text: str) -> None:
        self._pending += text
        while self._pending:
            if self._inside:
                end = self._pending.find(CLOSE)
                if end < 0:
                    # Keep only what could still be the start of the closing tag.
                    self._pending = self._pending[-(len(CLOSE) - 1) :]
                    return
                self._pending = self._pending[end + len(CLOSE) :]
                self._inside = False
                continue
            start = self._pending.find(OPEN)
            if start >= 0:
                if start:
                    self._sink(self._pending[:start])
                self._pending = self._pending[start + len(OPEN) :]
                self._inside = True
                continue
            # Emit all but a tail that might be the beginning of "<tool_call>".
            keep = 0
            for k in range(min(len(OPEN) - 1, len(self._pending)), 0, -1):
                if OPEN.startswith(self._pending[-k:]):
                    keep = k
                    break
            if len(self._pending) > keep:
                self._sink(self._pending[: len(self._pending) - keep])
                self._pending = self._pending[len(self._pending) - keep :]
            return

    def flush(self) -> None:
        if self._pending and not self._inside:
            self._sink(self._pending)
        self._pending = ""
