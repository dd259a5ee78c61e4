"""The conversation widget: the user's turns, the agent's replies as they stream, tool calls,
harness cards and notices, and a resumed session's history, mounted a page at a time.

It follows its end while new output comes (until the user scrolls up). Streamed text is
buffered by the worker thread and moved onto the screen by the widget's own timer (FLUSH_HZ) into
one Markdown widget that grows; a long reply continues in a new one between paragraphs, outside
code fences.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import AwaitMount, Widget

from cuda_agent_cli.agent import events as ev
from cuda_agent_cli.chat.history import NOTICE_KINDS, HistoryItem
from cuda_agent_cli.tui.widgets import HarnessCard, Notice, SettledMarkdown, ToolCallLine, UserTurn

HISTORY_PAGE = 80  # history items mounted at once when a session is resumed
MD_SPLIT_CHARS = 1500  # a streamed reply continues in a new widget past this size
FLUSH_HZ = 15  # how often streamed text is moved onto the screen (each move is a frame)


def split_point(current: str, new: str, at_least: int = 0) -> int | None:
    """Where in `new`, `at_least` characters in or later, a paragraph ends outside a code fence
    (after "\n\n"), or None."""
    fences = current.count("```")
    i = 0
    while i < len(new):
        j = new.find("\n\n", i)
        k = new.find("```", i)
        if j < 0:
            return None
        if 0 <= k < j:
            fences += 1
            i = k + 3
            continue
        if fences % 2 == 0 and j + 2 >= at_least:
            return j + 2
        i = j + 2
    return None


def history_widget(item: HistoryItem) -> Widget:
    """The widget of one history item, made when it is shown."""
    if item.kind == "user":
        return UserTurn(item.text if len(item.text) < 2000 else item.text[:2000] + " …")
    if item.kind == "assistant":
        return SettledMarkdown(item.text)
    if item.kind == "tool":
        line = ToolCallLine(item.call_id, item.text, item.arguments)
        line.status, line.output, line.duration = item.status, item.output, item.duration
        line.expanded = item.expanded
        return line
    if item.kind == "card" and item.judged is not None:
        return HarnessCard(item.judged, item.best)
    return Notice(item.text, item.kind if item.kind in NOTICE_KINDS else "warning")


class Conversation(VerticalScroll):
    """The conversation; `show(event)` draws an agent event (EVENTS says which method does)."""

    def __init__(self) -> None:
        super().__init__(id="conversation")
        self.following = True  # the conversation follows new output until the user scrolls up
        self._md: SettledMarkdown | None = None
        self._streamed = False
        self._md_source = ""
        self._pending_text: list[str] = []
        self._text_lock = threading.Lock()
        self._flush_lock = asyncio.Lock()
        self._older: list[HistoryItem] = []
        self._older_marker: Notice | None = None
        self._calls: dict[str, ToolCallLine] = {}

    def on_mount(self) -> None:
        self.set_interval(1 / FLUSH_HZ, self.flush_text)

    # -- adding ----------------------------------------------------------------------------------
    def add(self, widget: Widget) -> AwaitMount:
        """Append (following the end when it was at the end); awaitable."""
        at_end = self.following or self.scroll_y >= self.max_scroll_y - 2
        mounted = self.mount(widget)
        if at_end:
            # After the new widget is laid out, or a tall one would be left half below the fold.
            self.app.call_after_refresh(self.scroll_end, animate=False)
        return mounted

    def notice(self, text: str | Text, kind: str = "info") -> None:
        self.add(Notice(text, kind))

    def tool_call(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolCallLine:
        line = self._calls[call_id] = ToolCallLine(call_id, name, arguments)
        self.add(line)
        return line

    def clear(self) -> None:
        """What is shown goes (the transcript keeps it)."""
        self.remove_children()
        self._calls.clear()

    # -- agent events ----------------------------------------------------------------------------
    async def show(self, e: ev.Event) -> None:
        handler = self.EVENTS.get(type(e))
        if handler is not None:
            await handler(self, e)

    async def _text(self, e: ev.TextDelta) -> None:
        self.buffer_text(e.text)
        await self.flush_text()

    async def _assistant(self, e: ev.AssistantMessage) -> None:
        await self.end_stream()
        if e.content and e.content.strip() and not self._streamed:
            self.add(SettledMarkdown(e.content))
        self._streamed = False
        for c in e.tool_calls:
            line = ToolCallLine(c["id"], c["name"], c.get("arguments") or {})
            if c.get("error"):
                line.status, line.output = "error", f"Error: {c['error']}"
            self._calls[c["id"]] = line
            self.add(line)

    async def _tool_started(self, e: ev.ToolStarted) -> None:
        started = self._calls.get(e.call_id)
        if started is None:
            started = self.tool_call(e.call_id, e.name, e.arguments)
        started.set_status("running")

    async def _tool_finished(self, e: ev.ToolFinished) -> None:
        finished = self._calls.get(e.call_id)
        if finished is not None:
            finished.set_status("error" if e.is_error else "ok", e.output, e.duration_s)

    async def _retrying(self, e: ev.Retrying) -> None:
        self.notice(f"model call failed ({e.reason}); retry {e.attempt} in {e.wait_s:.0f} s", "warning")

    async def _compacted(self, e: ev.Compacted) -> None:
        self.notice(f"older turns compacted: about {e.tokens_before} -> {e.tokens_after} tokens")

    async def _stopped(self, e: ev.Stopped) -> None:
        await self.end_stream()
        if e.reason == "error":
            self.notice(f"the turn stopped on an error: {e.detail}", "error")
        elif e.reason not in ("done", "interrupted"):
            self.notice(f"stopped: {e.reason}" + (f" — {e.detail}" if e.detail else ""), "warning")

    EVENTS: dict[type[ev.Event], Callable[[Conversation, Any], Awaitable[None]]] = {
        ev.TextDelta: _text,
        ev.AssistantMessage: _assistant,
        ev.ToolStarted: _tool_started,
        ev.ToolFinished: _tool_finished,
        ev.Retrying: _retrying,
        ev.Compacted: _compacted,
        ev.Stopped: _stopped,
    }

    # -- the streamed reply ----------------------------------------------------------------------
    def buffer_text(self, text: str) -> None:
        """Streamed text from the worker thread, never waited on: the timer puts it on screen."""
        with self._text_lock:
            self._pending_text.append(text)

    async def flush_text(self) -> None:
        """Move streamed text from the worker's buffer into the reply on screen (a timer calls
        this FLUSH_HZ times a second, so the UI never waits on each chunk and each chunk never
        waits on the UI)."""
        async with self._flush_lock:
            self._hold_end()
            with self._text_lock:
                text = "".join(self._pending_text)
                self._pending_text.clear()
            if not text:
                return
            self._streamed = True
            while text:
                if self._md is None:
                    self._md = SettledMarkdown("", classes="assistant")
                    self._md_source = ""
                    await self.add(self._md)
                # A long reply goes into several widgets, split between paragraphs outside code
                # fences, so each frame renders a small piece again, not the whole reply.
                room = MD_SPLIT_CHARS - len(self._md_source)
                cut = split_point(self._md_source, text, room) if len(text) > room else None
                head, text = (text, "") if cut is None else (text[:cut], text[cut:])
                if head:
                    self._md_source += head
                    self._md.append(head)
                if text:
                    self._stop_stream()
            if self.following and self.scroll_y < self.max_scroll_y:
                self.scroll_end(animate=False)  # the anchor was let go; the layout keeps it otherwise

    def _hold_end(self) -> None:
        """Anchor the conversation while it follows its end and is taller than the view: then
        the frame that lays out new text also scrolls to it (a scroll after the layout would be
        a second frame). textual lets go of the anchor when the user scrolls up. A conversation
        shorter than the view is never anchored: an anchored one is drawn against the bottom."""
        want = self.following and self.max_scroll_y > 0
        if want != self.is_anchored:
            self.anchor(want)
            if not want and self.scroll_y < 0:
                self.scroll_to(y=0, animate=False)

    def _stop_stream(self) -> None:
        # The streamed piece is already the settled widget: the next text starts a new one.
        self._md = None
        self._md_source = ""

    async def end_stream(self) -> None:
        await self.flush_text()
        async with self._flush_lock:
            self._stop_stream()

    async def end_turn(self) -> None:
        """The worker is done: what it streamed is on screen, and the next reply starts afresh."""
        await self.end_stream()
        self._streamed = False

    # -- history ---------------------------------------------------------------------------------
    def show_history(self, items: list[HistoryItem], resumed: str | Text) -> None:
        """Mount the newest page of `items` and the line saying what was resumed; older ones on
        demand (scrolling to the top, or Ctrl+Home), so a long session opens at once."""
        self._older = items[:-HISTORY_PAGE] if len(items) > HISTORY_PAGE else []
        widgets = [history_widget(item) for item in items[-HISTORY_PAGE:]]
        widgets.append(Notice(resumed, "info"))
        self._older_marker = Notice("", "info")
        self.mount(self._older_marker)
        self._mark_older()
        self.mount_all(widgets)
        self.scroll_end(animate=False)

    def _mark_older(self) -> None:
        marker = self._older_marker
        if marker is None:
            return
        marker.display = bool(self._older)
        if self._older:
            marker.update(f"↑ {len(self._older)} earlier items: scroll to the top or press Ctrl+Home to show them")

    def load_older(self) -> bool:
        """Mount the next page of older history above what is shown, keeping the view still."""
        if not self._older:
            return False
        page = self._older[-HISTORY_PAGE:]
        del self._older[-HISTORY_PAGE:]
        before = self.virtual_size.height
        y = self.scroll_y
        self.mount_all([history_widget(item) for item in page], after=self._older_marker)
        self._mark_older()

        def keep_view() -> None:
            self.scroll_to(y=y + self.virtual_size.height - before, animate=False)

        self.app.call_after_refresh(keep_view)
        return True

    def forget_history(self) -> None:
        """Another session is shown: its older pages replace these."""
        self._older = []

    # -- moving around ---------------------------------------------------------------------------
    def page(self, where: int) -> None:
        """A page up (-1) or down (1), or to the top (-2) or the end (2); the top of what is
        shown brings the next page of older history first."""
        self.following = where == 2 or (where == 1 and self.scroll_y >= self.max_scroll_y - self.size.height)
        if where == -2:
            if self.scroll_y <= 0:
                self.load_older()
            self.scroll_home(animate=False)
        elif where == 2:
            self.scroll_end(animate=False)
        elif where < 0:
            if self.scroll_y <= 0:
                self.load_older()
            self.scroll_page_up(animate=False)
        else:
            self.scroll_page_down(animate=False)

    def keep_end(self) -> None:
        """Its width changed (ledger, terminal): stay at the end if following."""
        if self.following:
            self.app.call_after_refresh(self.scroll_end, animate=False)

    def tool_lines(self) -> list[ToolCallLine]:
        return [line for line in self.query(ToolCallLine) if line.display]

    def step_tool_line(self, current: ToolCallLine | None, step: int) -> bool:
        """Move the focus between tool calls: from the prompt (`current` None) to the newest;
        from a tool call `step` calls down (+1) or up (-1), below the newest back to the prompt,
        above the oldest shown to the older history first. False when there is none to go to."""
        lines = self.tool_lines()
        if current is None:
            if not lines:
                return False
            target = lines[-1]
        else:
            i = lines.index(current) if current in lines else len(lines) - 1
            j = i + step
            if j < 0 and self.load_older():
                lines = self.tool_lines()
                j = lines.index(current) - 1 if current in lines else 0
            if j >= len(lines):
                prompts = self.app.query("#prompt")
                if prompts:
                    self.following = True
                    prompts.first().focus()
                    self.app.call_after_refresh(self.scroll_end, animate=False)
                return bool(prompts)
            if j < 0:
                return False
            target = lines[j]
        self.following = False  # the conversation stays where the focused call is
        target.focus()
        return True
