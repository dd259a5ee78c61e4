"""The status bar: the backend's facts (model, permission mode, context, tokens, cost, best
verified speedup) with what the app tells it (the device, what runs, how many messages wait),
and the keys for what has the focus."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Static

from cuda_agent_cli.tui import render
from cuda_agent_cli.tui.widgets import ToolCallLine

if TYPE_CHECKING:
    from textual.widget import Widget

    from cuda_agent_cli.chat.backend import ChatBackend
    from cuda_agent_cli.tui.conversation import Conversation


class StatusBar(Static):
    def __init__(self, conversation: Conversation, banner: str | None = None) -> None:
        super().__init__(id="status")
        self.conversation = conversation
        self.banner = banner
        self.device = "…"  # until the backend or the app's detection says
        self.busy: str | None = None
        self.queued = 0
        self.prompt = False  # the screen has a prompt: Shift+Tab there reaches the tool calls

    def show(self, backend: ChatBackend) -> None:
        self.update(
            render.status_text(
                model=backend.model_string,
                device=self.device,
                mode=backend.mode,
                context_pct=100.0 * backend.context_tokens / (backend.context_budget or 1),
                tokens=backend.tokens,
                cost=backend.cost_usd,
                best=backend.ledger.best_verified_speedup(),
                busy=self.busy,
                queued=self.queued,
                banner=self.banner,
                keys=self.keys_hint(self.app.focused),
            )
        )

    def keys_hint(self, focused: Widget | None) -> str | None:
        """The keys for what has the focus, at the end of the bar."""
        if isinstance(focused, ToolCallLine):
            return "tool call: Enter/Space output · ↑/↓ Shift+Tab/Tab move · type to write"
        if self.prompt and self.conversation.query(ToolCallLine):
            return "Shift+Tab: tool calls"
        return None
