"""The chat's prompt: what is typed, its history, and its completion popup (slash commands and
@files of the repository), which it mounts above itself after the first frame."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from textual import events
from textual.message import Message
from textual.widgets import TextArea

if TYPE_CHECKING:
    from textual.widget import Widget

    from cuda_agent_cli.tui.completions import Completions


# The conversation sits above the prompt's floor of widgets (it imports widgets, which import
# this): found by its name on the screen and used through what it offers here.
class _LineStepper(Protocol):
    def step_tool_line(self, current: Widget | None, step: int) -> bool: ...


class PromptArea(TextArea):
    """Multi-line prompt: Enter sends, Ctrl+J (or Shift+Enter) adds a line, Up/Down walk the history
    from the first/last line, Ctrl+R searches it, Tab takes a completion and Esc closes the popup;
    Tab (with no completion shown) and Shift+Tab go to the newest tool call."""

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, root: Path, **kw: Any) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, tab_behavior="focus", **kw)
        self.root = root  # the repository whose files @ completes
        self.past: list[str] = []
        self._pos: int | None = None  # index into history while walking it
        self._draft = ""
        self.search: str | None = None  # the Ctrl+R search term while searching
        self._search_from = 0
        self.completing = False  # completions show: Tab takes one, Up/Down choose
        self._completions: Completions | None = None

    # -- the completion popup --------------------------------------------------------------------
    def mount_completions(self) -> Completions:
        """The popup above the prompt, mounted by whoever needs it first: the app after the
        first frame, so its imports and CSS do not delay it, or the first key typed before."""
        if self._completions is None:
            from cuda_agent_cli.tui.completions import Completions

            self._completions = Completions()
            cast(Any, self.parent).mount(self._completions, before=self)
        return self._completions

    @property
    def completions(self) -> Completions:
        return self.mount_completions()

    def set_root(self, root: Path) -> None:
        """Another repository (a resumed chat's): its files are listed afresh at the next `@`."""
        self.root = root
        if self._completions is not None:
            self._completions.files = None

    def on_text_area_changed(self, _message: TextArea.Changed) -> None:
        self.completions.show_for(self.text, self, self.root)

    def hide_completions(self) -> bool:
        """Hide the popup; True when it was showing."""
        box = self._completions
        shown = box is not None and box.display
        if box is not None:
            box.hide(self)
        self.completing = False
        return shown

    # -- keys ------------------------------------------------------------------------------------
    def on_blur(self) -> None:
        self.hide_completions()  # a popup for a prompt the keys no longer reach

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        if key == "escape" and self.hide_completions():
            event.stop()
            event.prevent_default()
            return
        walking = self._pos is not None and key in ("up", "down")  # the history, not the popup
        if self.completing and key in ("tab", "up", "down") and not walking:
            event.stop()
            event.prevent_default()
            if key == "tab":
                self.completions.accept(self)
            else:
                self.completions.move(-1 if key == "up" else 1)
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
            self.submit()
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

    def submit(self) -> None:
        """Send what the prompt holds (nothing when it holds only blanks)."""
        text = self.text
        if text.strip():
            self.remember(text)
            self.load_text("")
            self.post_message(self.Submitted(text))

    def take_typed(self, key: str, text: str | None) -> None:
        """What was typed while another screen had the keyboard (an approval): text goes in,
        Backspace takes a character out, Enter sends."""
        if key == "enter":
            self.submit()
        elif key == "backspace":
            self.action_delete_left()
        elif text:
            self.insert(text)

    # -- history ---------------------------------------------------------------------------------
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
