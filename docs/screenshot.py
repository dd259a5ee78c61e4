"""Regenerate the screenshots of `cuda-agent chat` in the README and docs/chat.md (SVG, textual's own export).

Runs the bundled CPU example through `/optimize` inside the chat, with the recorded demo
session as the model and the real harness, in a scratch git repository; saves the review screen
and, after `y`, the main screen with the kernel ledger open.

Usage: python docs/screenshot.py   (about a minute on a 2-core machine; writes docs/chat-*.svg)
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from cuda_agent_cli import demo  # noqa: E402
from cuda_agent_cli.chat.session import ChatOptions, ChatSession  # noqa: E402
from cuda_agent_cli.tui.app import ChatApp  # noqa: E402
from cuda_agent_cli.tui.screens import ReviewScreen  # noqa: E402
from cuda_agent_cli.writeback.git import init_repo  # noqa: E402

DOCS = Path(__file__).resolve().parent


async def until(pilot, cond, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("the chat did not get there in time")
        await pilot.pause(0.1)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "vit-project"
        demo.copy_example(repo)
        init_repo(repo, "example")
        rt = ChatSession(
            ChatOptions(path=repo, model=f"replay:{demo.replay_path('cpu')}", device="cpu", data_dir=Path(tmp) / "data")
        )
        app = ChatApp(rt)

        async def go() -> None:
            async with app.run_test(size=(150, 46)) as pilot:
                prompt = app.query_one("#prompt")
                prompt.load_text(f'/optimize {demo.EXAMPLE}::{demo.CLASS} --inputs "{demo.INPUTS["cpu"]}"')
                await pilot.press("enter")
                await until(pilot, lambda: isinstance(app.screen, ReviewScreen) and app.screen.query("#review-diff"))
                await pilot.pause(0.5)
                app.save_screenshot(str(DOCS / "chat-review.svg"))
                await pilot.press("y")
                await until(pilot, lambda: not isinstance(app.screen, ReviewScreen) and app.busy is None)
                await pilot.press("ctrl+l")
                await pilot.pause(0.5)
                app.save_screenshot(str(DOCS / "chat-main.svg"))

        asyncio.run(go())
        rt.close()
    print(f"wrote {DOCS / 'chat-main.svg'} and {DOCS / 'chat-review.svg'}")


if __name__ == "__main__":
    main()
