"""The chat app (`cuda-agent chat`): the conversation, the kernel ledger, the prompt and the
status bar over one `chat.session.ChatSession`.

It is the shared frame (tui/shell.py: the conversation, status bar, ledger, worker, approvals
and review) with the chat's own parts: the prompt (tui/prompt.py, with its history and
completion popup) and the slash commands (tui/slash.py, one handler per row of
`chat.commands.COMMANDS`). Here: what a line from the prompt does (a command, a `!cmd`, a
message sent, or queued while the agent works), the queue, and what the review's answer does.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Callable

from textual.app import ComposeResult
from textual.containers import Horizontal

from cuda_agent_cli.chat import commands
from cuda_agent_cli.chat.session import ChatSession
from cuda_agent_cli.tui.prompt import PromptArea
from cuda_agent_cli.tui.shell import AgentShell, detect_device
from cuda_agent_cli.tui.slash import SlashCommands
from cuda_agent_cli.tui.widgets import ToolCallLine, UserTurn

if TYPE_CHECKING:
    from cuda_agent_cli.actions.toolbox import ToolResult
    from cuda_agent_cli.run.optimize import OptimizeOutcome
    from cuda_agent_cli.tui.screens import ApprovalScreen  # imported with the first approval

PLACEHOLDER = "Message cuda-agent — /help for commands, @file to attach"


class ChatApp(AgentShell[ChatSession]):
    AUTO_FOCUS = "#prompt"

    def __init__(
        self,
        runtime: ChatSession,
        initial: list[str] | None = None,
        detect: Callable[[], str] = detect_device,
        banner: str | None = None,
    ) -> None:
        super().__init__(runtime, detect=detect, banner=banner)
        self.prompt = PromptArea(runtime.root, id="prompt", placeholder=PLACEHOLDER)
        self.status_bar.prompt = True
        self.commands = SlashCommands(self, lambda: self.backend, self.switch_session, self.review_optimize)
        self.queue: deque[str] = deque()  # messages typed while the agent works, sent in turn
        self.initial = list(initial or [])

    def compose(self) -> ComposeResult:
        # The ledger and the completion popup come after the first frame (`on_ready`), so their
        # CSS and imports do not delay it.
        with Horizontal(id="main"):
            yield self.conversation
        yield self.prompt
        yield self.status_bar
        yield self.too_small

    def on_agent_shell_opened(self, _message: AgentShell.Opened) -> None:
        for text in self.initial:
            self.submit(text)

    def on_ready(self) -> None:
        # textual calls the frame's on_ready (the ledger) as well: each mounts its own part.
        self.prompt.mount_completions()

    # -- the prompt ------------------------------------------------------------------------------
    def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        self.prompt.hide_completions()
        self.submit(message.text)

    def on_approval_screen_typed(self, message: ApprovalScreen.Typed) -> None:
        """What is typed while an approval shows goes to the prompt (it answers nothing): kept,
        and sent or queued on Enter as when the agent works."""
        self.prompt.take_typed(message.key, message.text)

    def submit(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        if commands.is_command(text):
            self.commands.run(text)
        elif text.startswith("!") and len(text) > 1:
            self.run_shell(text[1:].strip())
        elif self.busy or self.review_open:
            self.queue.append(text)
            self.status_bar.queued = len(self.queue)
            self.add(UserTurn(text, queued=True))
            self.refresh_status()
        else:
            self.send(text)

    def send(self, text: str) -> None:
        self.add(UserTurn(text))
        session, work = self.backend, self.work
        self.event_session = session.session_id
        self.start_work("working", lambda: session.send(text, work.tell, work.cancel))

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

        session = self.backend
        self.start_work("running !" + command.split()[0], lambda: session.run_shell(command), show)

    def on_agent_shell_settled(self, _message: AgentShell.Settled) -> None:
        self.send_queued()

    def send_queued(self) -> None:
        """The next message typed while the agent worked, once nothing runs or waits for a review."""
        if self.queue and not self.busy and not self.review_open:
            text = self.queue.popleft()
            self.status_bar.queued = len(self.queue)
            self.send(text)

    def switch_session(self, new: ChatSession) -> None:
        """/resume: another chat session on screen (its conversation, ledger and repository)."""
        self.backend = new
        self.conversation.clear()
        self.prompt.set_root(new.root)
        self.show_opening()
        self.ledger_panel.show(new.ledger)
        self.refresh_status()

    # -- the review of an /optimize run ----------------------------------------------------------
    def review_optimize(self, outcome: OptimizeOutcome) -> None:
        no_kernel = f"no correct kernel in this run (stopped: {outcome.stop_reason}); nothing to review"
        self.review(outcome, no_kernel, lambda apply: self.reviewed(outcome, apply))

    def reviewed(self, outcome: OptimizeOutcome, apply: bool) -> None:
        for note in self.backend.decide(outcome, apply):
            self.notice(note.text, note.kind)
        self.send_queued()
