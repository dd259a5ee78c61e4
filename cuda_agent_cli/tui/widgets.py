"""The chat's widgets: conversation pieces, the tool call line, the ledger, the prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static, TextArea

from cuda_agent_cli.tui import render
from cuda_agent_cli.tui.markdown_blocks import MarkdownBlocks


# The conversation and the completion box sit above these widgets (conversation.py and
# completions.py import them): found by their names on the screen, and used through what they
# offer here, so that no import runs back up.
class _LineStepper(Protocol):
    def step_tool_line(self, current: "ToolCallLine | None", step: int) -> bool: ...


class _CompletionBox(Protocol):
    def accept(self, prompt: "PromptArea") -> None: ...

    def move(self, step: int) -> None: ...


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


class PromptArea(TextArea):
    """Multi-line prompt: Enter sends, Ctrl+J (or Shift+Enter) adds a line, Up/Down walk the history
    from the first/last line, Ctrl+R searches it, Tab takes a completion; Tab (with no completion
    shown) and Shift+Tab go to the newest tool call."""

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kw: Any) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, tab_behavior="focus", **kw)
        self.past: list[str] = []
        self._pos: int | None = None  # index into history while walking it
        self._draft = ""
        self.search: str | None = None  # the Ctrl+R search term while searching
        self._search_from = 0
        self.completing = False  # the app shows completions: Tab takes one, Up/Down choose

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        walking = self._pos is not None and key in ("up", "down")  # the history, not the popup
        if self.completing and key in ("tab", "up", "down") and not walking:
            event.stop()
            event.prevent_default()
            box = cast(_CompletionBox, self.screen.query_one("Completions"))
            if key == "tab":
                box.accept(self)
            else:
                box.move(-1 if key == "up" else 1)
            return
        if key in ("tab", "shift+tab"):
            conversations = self.screen.query("Conversation")
            if conversations and cast(_LineStepper, conversations.first()).step_tool_line(None, -1):
                event.stop()
                event.prevent_default()
                return
        if key == "enter":
            event.stop()
            event.prevent_default()
            text = self.text
            if text.strip():
                self.remember(text)
                self.load_text("")
                self.post_message(self.Submitted(text))
            return
        if key in ("ctrl+j", "shift+enter"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if key == "ctrl+r":
            event.stop()
            event.prevent_default()
            self.search_history()
            return
        if self.search is not None and key not in ("ctrl+r",):
            self.search = None
        await super()._on_key(event)

    def remember(self, text: str) -> None:
        if not self.past or self.past[-1] != text:
            self.past.append(text)
        self._pos = None
        self.search = None

    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.past:
            if self._pos is None:
                self._draft = self.text
                self._pos = len(self.past)
            if self._pos > 0:
                self._pos -= 1
                self._show(self.past[self._pos])
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self._pos is not None and self.cursor_location[0] >= self.document.line_count - 1:
            self._pos += 1
            if self._pos >= len(self.past):
                self._pos = None
                self._show(self._draft)
            else:
                self._show(self.past[self._pos])
            return
        super().action_cursor_down(select)

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    def search_history(self) -> None:
        """Reverse search: the newest entry containing what was typed; again for an older one."""
        if self.search is None:
            self.search = self.text
            self._search_from = len(self.past)
        term = self.search
        for i in range(self._search_from - 1, -1, -1):
            if term in self.past[i]:
                self._search_from = i
                self._show(self.past[i])
                self.notify(f"history search {term!r}: {len(self.past) - i} back", timeout=2)
                return
        self.notify(f"no older entry contains {term!r}", severity="warning", timeout=2)
