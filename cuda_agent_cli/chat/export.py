"""A chat transcript as Markdown (`/export`): pure, from the recorded events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from cuda_agent_cli.agent.events import (
    AssistantMessage,
    Compacted,
    Event,
    HarnessResultEvent,
    ShellCommand,
    Stopped,
    ToolFinished,
    UserMessage,
)

MAX_OUTPUT = 4000


def _cut(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + "\n[... cut ...]"


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def transcript_markdown(events: Iterable[Event], title: str) -> str:
    out = [f"# {title}", ""]
    for ev in events:
        if isinstance(ev, UserMessage):
            out += ["## You", "", ev.content.strip(), ""]
        elif isinstance(ev, AssistantMessage):
            out += [f"## cuda-agent (turn {ev.turn})", ""]
            if ev.content:
                out += [ev.content.strip(), ""]
            for c in ev.tool_calls:
                args = json.dumps(c.get("arguments") or {}, ensure_ascii=False)
                out += [f"- tool `{c.get('name')}` {args[:300]}"]
            if ev.tool_calls:
                out.append("")
        elif isinstance(ev, ToolFinished):
            out += [
                f"<details><summary>{ev.name} {'failed' if ev.is_error else 'output'}</summary>",
                "",
                _fence(_cut(ev.output)),
                "",
                "</details>",
                "",
            ]
        elif isinstance(ev, ShellCommand):
            out += [
                "## You (`!` shell, in the sandbox)",
                "",
                _fence("$ " + ev.command, "sh"),
                "",
                f"<details open><summary>shell {'failed' if ev.is_error else 'output'}</summary>",
                "",
                _fence(_cut(ev.output)),
                "",
                "</details>",
                "",
            ]
        elif isinstance(ev, HarnessResultEvent):
            r = ev.result
            t = r.timings
            line = f"**{ev.tool}**: compiled {r.compiled}, correct {r.correct}, reward {r.reward}"
            if t:
                line += f", {t.speedup_vs_eager:.2f}x vs eager, {t.speedup_vs_compile:.2f}x vs torch.compile"
            out += [line, ""]
        elif isinstance(ev, Compacted):
            out += [f"_(older turns compacted: {ev.tokens_before} -> {ev.tokens_after} tokens)_", ""]
        elif isinstance(ev, Stopped) and ev.reason not in ("done",):
            out += [f"_(stopped: {ev.reason}{' — ' + ev.detail if ev.detail else ''})_", ""]
    return "\n".join(out).rstrip() + "\n"


def export_transcript(transcript: Path, dest: Path, title: str) -> Path:
    from cuda_agent_cli.agent.transcript import read_events

    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(transcript_markdown(read_events(transcript), title), encoding="utf-8")
    return dest
