"""The chat's widgets: conversation pieces, the tool call line, harness cards, the ledger."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Static

from cuda_agent_cli.tui import render
from cuda_agent_cli.tui.markdown_blocks import MarkdownBlocks
from cuda_agent_cli.tui.prompt import PromptArea


# The conversation sits above these widgets (conversation.py imports them): found by its name on
# the screen, and used through what it offers here, so that no import runs back up.
class _LineStepper(Protocol):
    def step_tool_line(self, current: ToolCallLine | None, step: int) -> bool: ...


if TYPE_CHECKING:
    from cuda_agent_cli.chat.ledger import Judged


def __getattr__(name: str) -> Any:
    # The ledger's table is mounted after the first frame; its module (and textual's DataTable)
    # is imported then, not with these widgets.
    if name == "LedgerPanel":
        from cuda_agent_cli.tui.ledger_panel import LedgerPanel

        return LedgerPanel
    raise AttributeError(name)


class UserTurn(Static):
    def __init__(self, text: str, queued: bool = False) -> None:
        body = Text("› ", style="bold cyan")
        body.append(text)
        if queued:
            body.append("  (queued)", style="dim")
        super().__init__(body, classes="user-turn")


class SettledMarkdown(Widget):
    """Assistant text drawn as one widget (rich's Markdown) instead of textual's Markdown with a
    widget per block: a long conversation lays out in a fraction of the time. A streamed reply
    grows it with `append`; each top-level block is rendered once per width and only the block
    still growing again (markdown_blocks), so a frame costs about one paragraph's render, not the
    reply's (the 5,000-token benchmark, docs/benchmarks.md)."""

    DEFAULT_CSS = "SettledMarkdown { height: auto; }"

    def __init__(self, source: str, classes: str = "assistant-history") -> None:
        super().__init__(classes=classes)
        # Markdown's links are terminal hyperlinks, never textual's @click links: without this,
        # textual copies every line of the widget each frame to restyle links it has none of.
        self.auto_links = False
        self._blocks = MarkdownBlocks(self, source)

    @property
    def source(self) -> str:
        return self._blocks.source

    def append(self, text: str) -> None:
        self._blocks.append(text)
        self.refresh(layout=True)

    def render(self) -> MarkdownBlocks:
        return self._blocks


class Notice(Static):
    """A line from cuda-agent itself: info, or an error (which never ends the app)."""

    def __init__(self, text: Any, kind: str = "info") -> None:
        super().__init__(text, classes=f"notice {kind}", markup=False)


class ToolCallLine(Widget, can_focus=True):
    """One tool call collapsed to a line; Enter or Space shows its highlighted output, Up or
    Shift+Tab goes to the tool call above, Down or Tab to the one below (below the newest: the
    prompt), and what else is typed goes to the prompt."""

    BINDINGS = [
        Binding("enter,space", "toggle_output", "Expand", show=False),
        Binding("up,shift+tab", "step(-1)", "Previous tool call", show=False),
        Binding("down,tab", "step(1)", "Next tool call", show=False),
    ]

    def __init__(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        super().__init__(classes="tool-call")
        self.call_id = call_id
        self.tool = name
        self.arguments = arguments or {}
        self.status = "pending"
        self.duration: float | None = None
        self.output = ""
        self.expanded = False

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="tool-header")
        yield Static("", classes="tool-body")

    def _header(self) -> Text:
        return render.tool_header(self.tool, self.arguments, self.status, self.duration, self.expanded)

    def _refresh(self) -> None:
        self.set_class(self.expanded, "-expanded")
        headers = self.query(".tool-header")
        if not headers:
            return
        headers.first(Static).update(self._header())
        body = self.query_one(".tool-body", Static)
        if self.expanded:
            body.update(render.tool_output(self.tool, self.arguments, self.output or "(no output yet)"))

    def on_mount(self) -> None:
        self._refresh()

    def set_status(self, status: str, output: str | None = None, duration: float | None = None) -> None:
        self.status = status
        if output is not None:
            self.output = output
        if duration is not None:
            self.duration = duration
        self._refresh()

    def action_toggle_output(self) -> None:
        self.expanded = not self.expanded
        self._refresh()

    def action_step(self, step: int) -> None:
        cast(_LineStepper, self.query_ancestor("Conversation")).step_tool_line(self, step)

    def on_click(self) -> None:
        self.focus()
        self.action_toggle_output()

    def on_key(self, event: events.Key) -> None:
        """A letter typed here is the start of the next message: it goes to the prompt, which
        takes the focus back (Enter and Space stay this line's)."""
        if event.key == "space" or not event.is_printable or not event.character:
            return
        prompts = self.app.query(PromptArea)
        if not prompts:
            return  # optimize's screen has no prompt: its own keys (q) apply
        event.stop()
        event.prevent_default()
        prompt = prompts.first()
        prompt.focus()
        prompt.insert(event.character)


class HarnessCard(Static):
    """A harness result as the ledger judged it: its card, starred when it was the best then."""

    def __init__(self, judged: Judged, best: bool) -> None:
        super().__init__(
            render.harness_card(judged.tool, judged.result, best, judged.candidate), classes="harness-card"
        )
        self.result = judged.result
        self.best = best
