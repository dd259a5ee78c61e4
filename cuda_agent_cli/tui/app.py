"""The chat app (`cuda-agent chat`): the conversation, the kernel ledger, the prompt and the
status bar over one `chat.session.ChatSession`.

The screen's parts live beside it: the conversation widget (tui/conversation.py), the worker,
events, approvals and the review every agent run has (tui/agent_app.py), the slash commands
(tui/slash.py, dispatched from `chat.commands.COMMANDS`) and the completion popup
(tui/completions.py). Here: what the prompt does with a line (a command, a `!cmd`, a message
sent or queued while the agent works) and what the review's answer does.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from cuda_agent_cli.chat import commands, mentions
from cuda_agent_cli.chat.session import ChatSession
from cuda_agent_cli.tui.agent_app import detect_device
from cuda_agent_cli.tui.conversation import Conversation
from cuda_agent_cli.tui.slash import SlashCommands
from cuda_agent_cli.tui.widgets import PromptArea, ToolCallLine, UserTurn

if TYPE_CHECKING:
    from textual.widgets import TextArea

    from cuda_agent_cli.actions.toolbox import ToolResult
    from cuda_agent_cli.run.optimize import OptimizeOutcome


class ChatApp(SlashCommands):
    def __init__(
        self,
        runtime: ChatSession,
        initial: list[str] | None = None,
        detect: Callable[[], str] = detect_device,
        banner: str | None = None,
    ) -> None:
        super().__init__(runtime, detect=detect, banner=banner)
        self.check_handlers()
        self.initial = list(initial or [])

    def compose(self) -> ComposeResult:
        # The ledger and the completion popup are hidden at first: they are mounted after the
        # first frame (`on_ready`), so their CSS and imports do not delay it.
        with Horizontal(id="main"):
            yield Conversation()
        yield PromptArea(id="prompt", placeholder="Message cuda-agent — /help for commands, @file to attach")
        yield Static(id="status")
        yield Static(id="too-small")

    def begin(self) -> None:
        for text in self.initial:
            self.submit(text)

    # -- the prompt ------------------------------------------------------------------------------
    def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        self.hide_completions()
        self.submit(message.text)

    def submit(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        if commands.is_command(text):
            self.run_command(text)
        elif text.startswith("!") and len(text) > 1:
            self.run_shell(text[1:].strip())
        elif self.busy or self.review_open:
            self.queue.append(text)
            self.add(UserTurn(text, queued=True))
            self.refresh_status()
        else:
            self.send(text)

    def send(self, text: str) -> None:
        self.add(UserTurn(text))
        _, problems = mentions.expand(text, self.runtime.root)
        for p in problems:
            self.notice(p, "warning")
        self.runtime.permissions.ask = self.ask
        self._event_session = self.runtime.session_id
        self.start_work("working", lambda: self.runtime.send(text, self.sink, self.cancel))

    def run_shell(self, command: str) -> None:
        if self.busy:
            self.notice("!commands wait until the agent is done (Esc interrupts it)", "warning")
            return
        self.add(UserTurn("!" + command))
        line = ToolCallLine(f"shell-{time.monotonic()}", "Bash", {"command": command})
        self.add(line)
        line.set_status("running")
        t0 = time.monotonic()

        def show(result: ToolResult) -> None:
            line.expanded = True
            line.set_status("error" if result.is_error else "ok", result.output, time.monotonic() - t0)

        self.start_work("running !" + command.split()[0], lambda: self.runtime.run_shell(command), show)

    def on_text_area_changed(self, message: TextArea.Changed) -> None:
        self.completions_box.show_for(message.text_area.text, self.query_one("#prompt", PromptArea), self.runtime.root)

    def work_done(self) -> None:
        if self.queue and not self.busy and not self.review_open:
            self.send(self.queue.popleft())

    # -- the review of an /optimize run ----------------------------------------------------------
    def no_kernel(self, outcome: OptimizeOutcome) -> str:
        return f"no correct kernel in this run (stopped: {outcome.stop_reason}); nothing to review"

    def reviewed(self, outcome: OptimizeOutcome, apply: bool) -> None:
        for note in self.runtime.decide(outcome, apply):
            self.notice(note.text, note.kind)
        if self.queue and not self.busy:
            self.send(self.queue.popleft())
