"""A long reply streaming into the chat: the view follows its end, stays put once the user has
scrolled up, follows again after Ctrl+End, and the reply ends on screen as rich draws it."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from chat_helpers import chat_app, make_repo, replay_file, run, runtime, type_and_send, wait_for  # noqa: E402
from rich.markdown import Markdown  # noqa: E402
from textual.widgets import Static  # noqa: E402

from cuda_agent_cli.model.port import AssistantTurn  # noqa: E402
from cuda_agent_cli.tui.widgets import SettledMarkdown  # noqa: E402


def paragraphs(first: int, last: int) -> str:
    return "".join(
        f"Step {n}: the fused kernel keeps row {n} in **registers** and reads `x` once.\n\n"
        for n in range(first, last + 1)
    )


class GatedStream:
    """A model whose reply arrives in small chunks, in parts the test lets through one by one."""

    name = "gated"
    context_window = None

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts
        self.gates = [threading.Event() for _ in parts[1:]]

    def complete(self, messages: Any, tools: Any, on_text: Any = None) -> AssistantTurn:
        for i, part in enumerate(self.parts):
            if i:
                self.gates[i - 1].wait(30)
            for k in range(0, len(part), 7):
                on_text(part[k : k + 7])
        return AssistantTurn(content="".join(self.parts))

    def count_tokens(self, messages: Any) -> int:
        return 0


def test_the_view_follows_a_streaming_reply_until_the_user_scrolls_up(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    replay_file(tmp_path / "r.jsonl", [])
    rt = runtime(repo, f"replay:{tmp_path / 'r.jsonl'}", tmp_path / "data", device="cpu")
    parts = [paragraphs(1, 30), paragraphs(31, 45), paragraphs(46, 60)]
    model = GatedStream(parts)
    rt.model = model  # type: ignore[assignment]
    app = chat_app(rt)

    def shown() -> str:
        return "".join(m.source for m in app.conversation.query(SettledMarkdown))

    def at_end() -> bool:
        conv = app.conversation
        return conv.max_scroll_y > 0 and conv.scroll_y == conv.max_scroll_y

    async def go():
        async with app.run_test(size=(100, 30)) as pilot:
            conv = app.conversation
            await type_and_send(pilot, app, "explain")
            await wait_for(pilot, lambda: shown() == parts[0] and at_end(), what="the first part, followed")
            await pilot.press("pageup")
            await pilot.pause()
            y = conv.scroll_y
            assert y < conv.max_scroll_y
            model.gates[0].set()
            await wait_for(pilot, lambda: shown() == parts[0] + parts[1], what="the second part")
            await pilot.pause(0.3)
            assert conv.scroll_y == y  # what the user scrolled to stays where it is
            await pilot.press("ctrl+end")
            await pilot.pause()
            model.gates[1].set()
            await wait_for(pilot, lambda: app.busy is None and shown() == "".join(parts), what="the whole reply")
            await wait_for(pilot, at_end, what="the end followed again")
            # On screen as rich draws the reply (each widget holds one stretch of it, whole).
            for widget in list(conv.query(SettledMarkdown)):
                reference = Static(Markdown(widget.source, code_theme="monokai"), classes="assistant")
                await conv.mount(reference, after=widget)
                await pilot.pause()
                assert [widget.render_line(i) for i in range(widget.size.height)] == [
                    reference.render_line(i) for i in range(reference.size.height)
                ]
                await reference.remove()

    run(go())
    rt.close()
