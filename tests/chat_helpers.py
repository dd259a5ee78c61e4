"""Shared pieces of the chat TUI tests: a git repository, replay files, a runtime, waiting."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from cuda_agent_cli.chat.session import ChatOptions, ChatSession
from cuda_agent_cli.tui.app import ChatApp


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def make_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in (files or {"a.py": "x = 1\n"}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def replay_file(path: Path, turns: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))
    return path


# The two models every scripted flow runs against: the replay model, and litellm for real over
# HTTP to the fake OpenAI-compatible server on 127.0.0.1, streamed, with the same turns.
MODELS = ("replay", "fake-server")


@contextlib.contextmanager
def scripted_model(kind: str, turns: list[dict[str, Any]], path: Path) -> Iterator[dict[str, Any]]:
    """`runtime()` keywords for a model that answers with `turns`, one per request."""
    if kind == "replay":
        yield {"model": f"replay:{replay_file(path, turns)}"}
        return
    from cuda_agent_cli.model.fake_server import FakeOpenAIServer, reply_from_dict

    with FakeOpenAIServer([reply_from_dict(t) for t in turns], exhausted_text="") as srv:
        yield {"model": "openai/fake-coder", "api_base": srv.api_base}


def replay_turns(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def runtime(repo: Path, model: str, data: Path, **kw: Any) -> ChatSession:
    return ChatSession(ChatOptions(path=repo, model=model, data_dir=data, **kw))


def chat_app(rt: ChatSession, **kw: Any) -> ChatApp:
    return ChatApp(rt, detect=lambda: "cpu", **kw)


async def wait_for(pilot: Any, cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def type_and_send(pilot: Any, app: ChatApp, text: str) -> None:
    prompt = app.query_one("#prompt")
    prompt.load_text(text)
    await pilot.pause()
    await pilot.press("enter")


KEY_NAMES = {"enter": "\r", "escape": "\x1b", "tab": "\t", "shift+tab": None, "up": None, "down": None}


def type_ahead(app: ChatApp, *parts: str) -> None:
    """Keys posted to the app all at once, as a terminal hands over what was typed ahead (Pilot's
    `press` waits after each key). A part is a key name of KEY_NAMES, or text typed as it is."""
    from textual import events
    from textual.keys import _character_to_key

    for part in parts:
        if part in KEY_NAMES:
            app.post_message(events.Key(part, KEY_NAMES[part]))
            continue
        for c in part:
            app.post_message(events.Key(c if c.isalnum() else _character_to_key(c), c))


def plain(content: Any, width: int = 160) -> str:
    """A rich renderable (or str / Text) as the plain text a terminal would show."""
    import io

    from rich.console import Console

    if isinstance(content, str):
        return content
    if hasattr(content, "plain"):
        return content.plain
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(content)
    return console.export_text()


def texts(app: ChatApp, root: Any = None) -> str:
    """Everything the conversation (or another container) shows, as plain text."""
    from textual.widgets import Markdown, Static

    out = []
    for w in (root or app.conversation).walk_children():
        if isinstance(w, Markdown) or hasattr(w, "source"):
            out.append(w.source)
        elif isinstance(w, Static) and not any(isinstance(a, Markdown) for a in w.ancestors):
            out.append(plain(w.content))
    return "\n".join(out)


def run(coro: Any) -> Any:
    return asyncio.run(coro)
