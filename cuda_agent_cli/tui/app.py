"""The chat app: conversation, kernel ledger, prompt and status bar over one ChatRuntime.

The agent runs in a worker thread; its events reach this thread through `call_from_thread` and
are rendered here. Nothing the worker raises ends the app: errors become lines in the
conversation.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from cuda_agent_cli.agent import events as ev
from cuda_agent_cli.errors import CudaAgentError, Interrupted
from cuda_agent_cli.tui import commands, mentions, render
from cuda_agent_cli.tui.approval import ApprovalRequest, Decision
from cuda_agent_cli.tui.widgets import HarnessCard, Notice, PromptArea, SettledMarkdown, ToolCallLine, UserTurn

if TYPE_CHECKING:  # imported when first needed, after the first frame
    from textual.widgets import OptionList, TextArea

    from cuda_agent_cli.tui.ledger_panel import LedgerPanel

HISTORY_PAGE = 80  # history items mounted at once when a session is resumed
MD_SPLIT_CHARS = 1500  # a streamed reply continues in a new widget past this size
FLUSH_HZ = 15  # how often streamed text is moved onto the screen (each move is a frame)
SETTLE_S = 0.5  # after the first frame: the collector's settings and the renderer's warm-up
MIN_WIDTH = render.MIN_WIDTH
MIN_HEIGHT = render.MIN_HEIGHT
QUIT_WINDOW_S = 3.0
KEY_SETTLE_S = 1.0  # the longest a typed-ahead key waits on one part of the app that handles the one before


def detect_device() -> str:
    """The GPU's name when one is visible, else cpu (no torch import: that costs seconds and memory)."""
    from cuda_agent_cli.machine import this_machine

    gpu = this_machine().gpu_for()  # what machine.pick_device decides on
    return f"cuda ({gpu.name})" if gpu else "cpu"


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


def _turn_items(e: Any, items: list[HistoryItem], calls: dict[str, HistoryItem]) -> None:
    """A stored agent event as the conversation showed it: a reply and its tool calls, a tool's
    result on its line, a stop that was not `done`."""
    if isinstance(e, ev.AssistantMessage):
        if e.content and e.content.strip():
            items.append(HistoryItem("assistant", e.content))
        for c in e.tool_calls:
            item = HistoryItem("tool", c["name"], c["id"], c.get("arguments") or {})
            if c.get("error"):
                item.status, item.output = "error", f"Error: {c['error']}"
            calls[c["id"]] = item
            items.append(item)
    elif isinstance(e, ev.ToolFinished) and e.call_id in calls:
        item = calls[e.call_id]
        item.status, item.output, item.duration = ("error" if e.is_error else "ok"), e.output, e.duration_s
    elif isinstance(e, ev.Stopped) and e.reason not in ("done",):
        items.append(HistoryItem("notice", f"stopped: {e.reason}" + (f" — {e.detail}" if e.detail else "")))


class HistoryItem:
    """One piece of a resumed conversation, made into a widget only when it is shown."""

    __slots__ = (
        "kind",
        "text",
        "call_id",
        "arguments",
        "status",
        "output",
        "duration",
        "expanded",
        "candidate",
        "best",
    )

    def __init__(self, kind: str, text: str, call_id: str = "", arguments: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.text = text
        self.call_id = call_id
        self.arguments = arguments or {}
        self.status = "pending"
        self.output = ""
        self.duration: float | None = None
        self.expanded = False
        self.candidate: Any = None  # a card: the ledger's result (tui.ledger.Judged), and whether it was best then
        self.best = False

    @classmethod
    def shell(cls, e: Any, n: int) -> list[HistoryItem]:
        """A `!cmd` the user ran, as the chat showed it: their line, and the command's output."""
        line = cls("tool", "Bash", f"shell-{n}", {"command": e.command})
        line.status, line.output, line.duration = ("error" if e.is_error else "ok"), e.output, e.duration_s
        line.expanded = True
        return [cls("user", "!" + e.command), line]

    @classmethod
    def card(cls, candidate: Any, best: bool) -> HistoryItem:
        item = cls("card", candidate.tool)
        item.candidate, item.best = candidate, best
        return item

    def widget(self) -> Any:
        if self.kind == "user":
            return UserTurn(self.text if len(self.text) < 2000 else self.text[:2000] + " …")
        if self.kind == "assistant":
            return SettledMarkdown(self.text)
        if self.kind == "tool":
            line = ToolCallLine(self.call_id, self.text, self.arguments)
            line.status, line.output, line.duration = self.status, self.output, self.duration
            line.expanded = self.expanded
            return line
        if self.kind == "card":
            c = self.candidate
            return HarnessCard(c.tool, c.result, self.best, c.candidate)
        return Notice(self.text, self.kind if self.kind in ("info", "success", "warning", "error") else "warning")


class ChatApp(App[int]):
    CSS_PATH = "chat.tcss"
    TITLE = "cuda-agent"
    NAME = "cuda-agent chat"
    LAYOUT = ("#main", "#prompt", "#status")  # hidden while the terminal is too small
    LEDGER_OPEN = False  # whether the ledger shows from the start (Ctrl+L toggles it)
    BINDINGS = [
        Binding("ctrl+c", "quit_twice", "Quit", priority=True, show=False),
        Binding("ctrl+q", "quit_twice", "Quit", priority=True, show=False),
        Binding("escape", "interrupt", "Interrupt", show=False),
        Binding("ctrl+l,f2", "toggle_ledger", "Ledger", priority=True, show=False),
        Binding("pageup", "scroll_conversation(-1)", "Scroll up", priority=True, show=False),
        Binding("pagedown", "scroll_conversation(1)", "Scroll down", priority=True, show=False),
        Binding("ctrl+home", "scroll_conversation(-2)", "Top", priority=True, show=False),
        Binding("ctrl+end", "scroll_conversation(2)", "Bottom", priority=True, show=False),
    ]

    def __init__(
        self,
        runtime: Any,
        initial: list[str] | None = None,
        detect: Callable[[], str] = detect_device,
        banner: str | None = None,
    ) -> None:
        super().__init__()
        self.runtime = runtime
        self.initial = list(initial or [])
        self.detect = detect
        self.banner = banner
        self.cancel = threading.Event()
        self.busy: str | None = None
        self.queue: deque[str] = deque()
        self.device_label = runtime.device or "…"
        self._conversation: VerticalScroll | None = None
        self._md: SettledMarkdown | None = None
        self._streamed = False
        self._md_source = ""
        self._pending_text: list[str] = []
        self._text_lock = threading.Lock()
        self._flush_lock = asyncio.Lock()
        self._older: list[HistoryItem] = []
        self._older_marker: Notice | None = None
        self._following = True  # the conversation follows new output until the user scrolls up
        self._calls: dict[str, ToolCallLine] = {}
        self._ctrl_c_at = 0.0
        self._thread: threading.Thread | None = None
        self._files: list[str] | None = None
        self._event_session: str | None = None
        self._session_costs: dict[str, float] = {}
        self.tokens = 0
        self.review_open = False
        self._later_done = False
        self._typed: deque[events.Event] = deque()  # keys (and pastes) typed ahead, taken one at a time
        self._key_pump: asyncio.Task[None] | None = None

    # -- layout ----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # The ledger and the completion popup are hidden at first: they are mounted after the
        # first frame (`on_ready`), so their CSS and imports do not delay it.
        with Horizontal(id="main"):
            yield VerticalScroll(id="conversation")
        yield PromptArea(id="prompt", placeholder="Message cuda-agent — /help for commands, @file to attach")
        yield Static(id="status")
        yield Static(id="too-small")

    def get_driver_class(self) -> Any:
        """textual's driver, on a Linux terminal with Escape followed by typed-ahead text kept
        apart (tui/terminal_input.py); TEXTUAL_DRIVER still picks another."""
        from textual import constants

        base = super().get_driver_class()
        if constants.DRIVER is not None:
            return base
        from cuda_agent_cli.tui.terminal_input import chat_driver

        return chat_driver(base)

    def on_mount(self) -> None:
        self.start()

    def start(self) -> None:
        """What the app does once mounted (a subclass's on_mount would run beside this one)."""
        self.query_one("#too-small").display = False
        self._load_history()
        self.refresh_status()
        self.query_one("#prompt").focus()
        self.set_interval(1 / FLUSH_HZ, self._flush_text)
        self._check_size()
        if self.runtime.device is None:
            threading.Thread(target=self._detect_device, daemon=True).start()
        for text in self.initial:
            self.submit(text)

    def _detect_device(self) -> None:
        label = self.detect()
        self._post(self._set_device, label)

    def _set_device(self, label: str) -> None:
        self.device_label = label
        self.refresh_status()

    def on_resize(self, event: Any) -> None:
        self._check_size(getattr(event, "size", None))
        self._keep_end()

    def _check_size(self, size: Any = None) -> None:
        w, h = size or self.size
        small = render.is_too_small(w, h)
        msg = self.query_one("#too-small", Static)
        msg.display = small
        for wid in self.LAYOUT:
            self.query_one(wid).display = not small
        if small:
            msg.update(render.too_small(w, h, self.NAME))

    # -- parts mounted after the first frame -----------------------------------------------------
    def on_ready(self) -> None:
        """textual's Ready: the first frame is on the terminal."""
        self.mount_later()
        self.set_timer(SETTLE_S, self._settle)

    def _settle(self) -> None:
        """Work done once the first frames are drawn (the ledger's comes a frame or two after
        the first): the collector's settings, and the Markdown renderer warmed in a thread for
        the first reply."""
        from cuda_agent_cli.tui import gc_policy, markdown_blocks

        gc_policy.tune_after_first_frame()
        threading.Thread(target=markdown_blocks.warm_up, name="cuda-agent-warm-up", daemon=True).start()

    def mount_later(self) -> None:
        """The ledger panel and the completion popup; whoever needs one first mounts it."""
        if self._later_done:
            return
        self._later_done = True
        from cuda_agent_cli.tui.ledger_panel import LedgerPanel

        panel = LedgerPanel(id="ledger")
        panel.display = self.LEDGER_OPEN
        panel.show(self.runtime.ledger)
        self.query_one("#main").mount(panel)
        if self.query("#prompt"):
            from textual.widgets import OptionList

            box = OptionList(id="completions")
            box.display = False
            self.mount(box, before="#prompt")

    @property
    def ledger_panel(self) -> LedgerPanel:
        from cuda_agent_cli.tui.ledger_panel import LedgerPanel

        self.mount_later()
        return self.query_one("#ledger", LedgerPanel)

    @property
    def completions_box(self) -> OptionList:
        from textual.widgets import OptionList

        self.mount_later()
        return self.query_one("#completions", OptionList)

    # -- keys typed ahead ------------------------------------------------------------------------
    IMMEDIATE_KEYS = frozenset({"ctrl+c", "ctrl+q"})  # never wait behind typed-ahead keys

    async def on_event(self, event: events.Event) -> None:
        """Keys (and pastes) from the terminal are taken one at a time, each once the one before
        has been handled in full (a command it submitted run, a screen it opened or closed):
        textual hands each key to the focused widget at once, so keys typed ahead would reach
        the prompt before the screen their earlier keys open, and an Escape meant for that
        screen would go to the prompt and be lost. A key with none before it goes at once."""
        typed = isinstance(event, events.Key) and event.key not in self.IMMEDIATE_KEYS
        if (typed or isinstance(event, events.Paste)) and not event.is_forwarded:
            if self._key_pump is not None and not self._key_pump.done():
                self._typed.append(event)
                return
            self._typed.append(event)
            self._key_pump = asyncio.create_task(self._deliver_typed())
            await asyncio.sleep(0)  # it delivers this key now; only the ones after it wait
            return
        await super().on_event(event)

    async def _deliver_typed(self) -> None:
        while self._typed and self.is_running:
            key = self._typed.popleft()
            target: Any = self.focused or self.screen
            screen = self.screen
            try:
                await super().on_event(key)  # textual's own routing: priority bindings, else the focus
                await self._drain(target.ancestors_with_self)
                if self.screen is not screen:  # opened or closed one: let it mount and take the focus
                    await self._drain([self.screen, self])
            except Exception as exc:  # what textual does with an error in its own handling of a key
                self._typed.clear()
                self._handle_exception(exc)
                return

    async def _drain(self, chain: list[Any]) -> None:
        """Until what `chain` (a widget and its ancestors, the app last) had queued has been
        handled, and what that queued in turn (a key bubbling up, a message it posted): each
        node's queue is drained in the order a bubbling message passes through them."""
        for _ in range(8):
            quiet = True
            for node in chain:
                if node is not self and node.message_queue_size:
                    quiet = False
                done = asyncio.Event()
                if not node.call_later(done.set):
                    continue
                try:
                    await asyncio.wait_for(done.wait(), KEY_SETTLE_S)
                except asyncio.TimeoutError:
                    return
            if quiet:
                return

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def conversation(self) -> VerticalScroll:
        # Kept once found: a timer still asks while the app closes, its widgets already gone.
        if self._conversation is None:
            self._conversation = self.query_one("#conversation", VerticalScroll)
        return self._conversation

    def _post(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn` in the app thread from a worker; quietly nothing once the app has closed."""
        try:
            return self.call_from_thread(fn, *args)
        except RuntimeError:
            return None

    def add(self, widget: Any) -> Any:
        """Append to the conversation (following it when it was at the end); awaitable."""
        conv = self.conversation
        at_end = self._following or conv.scroll_y >= conv.max_scroll_y - 2
        mounted = conv.mount(widget)
        if at_end:
            # After the new widget is laid out, or a tall one would be left half below the fold.
            self.call_after_refresh(conv.scroll_end, animate=False)
        return mounted

    def notice(self, text: Any, kind: str = "info") -> None:
        self.add(Notice(text, kind))

    def lasting_notice(self, text: str, kind: str = "info") -> None:
        """A notice a resumed chat shows again (its transcript does not hold it)."""
        self.notice(text, kind)
        record = getattr(self.runtime, "record_note", None)
        if record is not None:
            record(text, kind)

    def refresh_status(self) -> None:
        rt = self.runtime
        budget = rt.context_budget or 1
        cost = rt.state.cost_usd + sum(v for k, v in self._session_costs.items() if k != rt.session_id)
        self.query_one("#status", Static).update(
            render.status_text(
                model=rt.model_string,
                device=self.device_label,
                mode=rt.permissions.mode,
                context_pct=100.0 * rt.context_tokens / budget,
                tokens=self.tokens,
                cost=cost,
                best=rt.ledger.best_verified_speedup(),
                busy=self.busy,
                queued=len(self.queue),
                banner=self.banner,
                keys=self.keys_hint(),
            )
        )

    # -- history (resume) ------------------------------------------------------------------------
    def _load_history(self) -> None:
        """A resumed session's conversation: the newest items mounted, older ones on demand
        (scrolling to the top, or Ctrl+Home), so a long session opens at once."""
        from cuda_agent_cli.agent.context import estimate_tokens

        rt = self.runtime
        self._older = []
        path = rt.state.transcript_path
        if not path.is_file():
            self.notice(
                Text.assemble(
                    ("cuda-agent chat", "bold"),
                    f" over {rt.root.name}/ · session {rt.session_id} · "
                    "/help for commands, Esc interrupts, Ctrl+C twice quits",
                )
            )
            return
        items = self.history_items(path)
        if not rt.context_tokens:
            rt.context_tokens = estimate_tokens(rt.state.messages)
        self.show_history(
            items,
            f"resumed session {rt.session_id}: {rt.state.turns} turns, {rt.ledger.counted()} in the ledger",
        )

    def history_items(self, path: Path) -> list[HistoryItem]:
        """The conversation a stored transcript holds, as items to show; the status bar's tokens
        and context are taken from it on the way."""
        from cuda_agent_cli.agent.transcript import read_events

        rt = self.runtime
        items: list[HistoryItem] = []
        calls: dict[str, HistoryItem] = {}
        placed = self._placed_history()
        n = 0
        for n, e in enumerate(read_events(path)):
            while placed and placed[0][0] <= n:
                items.append(placed.pop(0)[1])
            if isinstance(e, ev.UserMessage):
                items.append(HistoryItem("user", e.content))
            elif isinstance(e, ev.AssistantMessage):
                self.tokens += e.prompt_tokens + e.completion_tokens
                _turn_items(e, items, calls)
            elif isinstance(e, ev.CostUpdate):
                rt.context_tokens, rt.context_budget = e.context_tokens, e.context_budget or rt.context_budget
            elif isinstance(e, ev.ShellCommand):
                items.extend(HistoryItem.shell(e, n))
            else:
                _turn_items(e, items, calls)
            extra = self.history_event(e)
            if extra is not None:
                items.append(extra)
        items.extend(item for _, item in placed)  # recorded after the last event, or before "at" was kept
        return items

    def history_event(self, e: Any) -> HistoryItem | None:
        """What else a stored event adds to the history. The chat's harness cards come from its
        chat file (`_placed_history`), so its transcript's events add nothing more."""
        return None

    def show_history(self, items: list[HistoryItem], resumed: str | Text) -> None:
        """Mount the newest page of `items` and the line saying what was resumed."""
        self._older = items[:-HISTORY_PAGE] if len(items) > HISTORY_PAGE else []
        widgets = [item.widget() for item in items[-HISTORY_PAGE:]]
        widgets.append(Notice(resumed, "info"))
        conv = self.conversation
        self._older_marker = Notice("", "info")
        conv.mount(self._older_marker)
        self._mark_older()
        conv.mount_all(widgets)
        conv.scroll_end(animate=False)

    def _placed_history(self) -> list[tuple[float, HistoryItem]]:
        """What the chat's transcript does not hold, at the place it happened (from the chat
        file): each /optimize session (its line, its start, the agent's turns and cards from its
        own transcript), the other harness cards (/verify, /profile), and the lines the chat
        recorded (what the review applied, what /undo reverted), sorted by where they go."""
        rt = self.runtime
        out: list[tuple[tuple[float, float, int, float], list[HistoryItem]]] = []
        end = float("inf")
        cards: dict[str, list[Any]] = {}
        for c in rt.ledger.judged:
            cards.setdefault(c.session_id, []).append(c)
        consumed: set[int] = set()

        def where(entry: dict[str, Any]) -> tuple[float, float, int, float]:
            at, after, seq = entry.get("at"), entry.get("after"), entry.get("seq")
            # Before the cards judged after it was recorded (a card's place: index - 1, then 1).
            return (
                at if isinstance(at, int) else end,
                after if isinstance(after, int) else end,
                0,
                seq if isinstance(seq, int) else 0,
            )

        for sid, start in getattr(rt, "optimize_started", {}).items():
            block = [HistoryItem("info", f"optimize session {sid} started for {start.get('target') or '?'}")]
            block += self._optimize_history(sid, cards.get(sid, []), consumed)
            out.append((where(start), block))
        for note in getattr(rt, "notes", []):
            out.append((where(note), [HistoryItem(str(note.get("kind") or "info"), note["text"])]))
        for c in rt.ledger.judged:
            if c.index not in consumed:
                key = (c.at if c.at is not None else end, float(c.index - 1), 1, 0.0)
                out.append((key, [HistoryItem.card(c, rt.ledger.was_best(c))]))
        out.sort(key=lambda pair: pair[0])
        return [(key[0], item) for key, block in out for item in block]

    def _optimize_history(self, sid: str, cards: list[Any], consumed: set[int]) -> list[HistoryItem]:
        """An /optimize session's conversation from its own transcript, as it was shown live: the
        agent's text and tool calls, each harness result as the ledger's card of it, a stop that
        was not `done`. Empty when its transcript is gone (the cards are then placed alone)."""
        from cuda_agent_cli.agent.transcript import read_events

        find = getattr(self.runtime, "optimize_transcript", None)
        path = find(sid) if find is not None else None
        if path is None or not path.is_file():
            return []
        items: list[HistoryItem] = []
        calls: dict[str, HistoryItem] = {}
        left = list(cards)
        try:
            for e in read_events(path):
                if isinstance(e, ev.HarnessResultEvent):
                    if left:
                        c = left.pop(0)
                        consumed.add(c.index)
                        items.append(HistoryItem.card(c, self.runtime.ledger.was_best(c)))
                elif not isinstance(e, ev.UserMessage):  # the task message was not shown live
                    _turn_items(e, items, calls)
        except (OSError, ValueError):
            return items
        return items

    def _mark_older(self) -> None:
        marker = getattr(self, "_older_marker", None)
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
        conv = self.conversation
        before = conv.virtual_size.height
        y = conv.scroll_y
        conv.mount_all([item.widget() for item in page], after=self._older_marker)
        self._mark_older()

        def keep_view() -> None:
            conv.scroll_to(y=y + conv.virtual_size.height - before, animate=False)

        self.call_after_refresh(keep_view)
        return True

    # -- agent events (app thread) ---------------------------------------------------------------
    async def handle_event(self, e: Any) -> None:
        if isinstance(e, ev.SessionStarted):
            self._event_session = e.session_id
            if e.session_id != self.runtime.session_id:
                self.runtime.record_optimize_session(e.session_id, e.target)
                self.notice(f"optimize session {e.session_id} started for {e.target}")
        elif isinstance(e, ev.TextDelta):
            with self._text_lock:
                self._pending_text.append(e.text)
            await self._flush_text()
        elif isinstance(e, ev.AssistantMessage):
            await self._end_stream()
            if e.content and e.content.strip() and not self._streamed:
                self.add(SettledMarkdown(e.content))
            self._streamed = False
            for c in e.tool_calls:
                line = ToolCallLine(c["id"], c["name"], c.get("arguments") or {})
                if c.get("error"):
                    line.status, line.output = "error", f"Error: {c['error']}"
                self._calls[c["id"]] = line
                self.add(line)
        elif isinstance(e, ev.ToolStarted):
            started = self._calls.get(e.call_id)
            if started is None:
                started = self._calls[e.call_id] = ToolCallLine(e.call_id, e.name, e.arguments)
                self.add(started)
            started.set_status("running")
        elif isinstance(e, ev.ToolFinished):
            finished = self._calls.get(e.call_id)
            if finished is not None:
                finished.set_status("error" if e.is_error else "ok", e.output, e.duration_s)
        elif isinstance(e, ev.HarnessResultEvent):
            sid = self._event_session or self.runtime.session_id
            judged = self.runtime.record_result(sid, e.tool, e.turn, e.result, e.sources)
            best = self.runtime.ledger.best() is judged
            self.add(HarnessCard(e.tool, e.result, best, judged.candidate))
            self.ledger_panel.show(self.runtime.ledger)
        elif isinstance(e, ev.CostUpdate):
            self.tokens += e.prompt_tokens + e.completion_tokens
            if (self._event_session or self.runtime.session_id) == self.runtime.session_id:
                self.runtime.context_tokens, self.runtime.context_budget = e.context_tokens, e.context_budget
            self._session_costs[self._event_session or self.runtime.session_id] = e.total_cost_usd
        elif isinstance(e, ev.Retrying):
            self.notice(f"model call failed ({e.reason}); retry {e.attempt} in {e.wait_s:.0f} s", "warning")
        elif isinstance(e, ev.Compacted):
            self.notice(f"older turns compacted: about {e.tokens_before} -> {e.tokens_after} tokens")
        elif isinstance(e, ev.Stopped):
            await self._end_stream()
            if e.reason == "error":
                self.notice(f"the turn stopped on an error: {e.detail}", "error")
            elif e.reason not in ("done", "interrupted"):
                self.notice(f"stopped: {e.reason}" + (f" — {e.detail}" if e.detail else ""), "warning")
        self.refresh_status()

    async def _flush_text(self) -> None:
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
                    await self._stop_stream()
            conv = self.conversation
            if self._following and conv.scroll_y < conv.max_scroll_y:
                conv.scroll_end(animate=False)  # the anchor was let go; the layout keeps it otherwise

    def _hold_end(self) -> None:
        """Anchor the conversation while it follows its end and is taller than the view: then
        the frame that lays out new text also scrolls to it (a scroll after the layout would be
        a second frame). textual lets go of the anchor when the user scrolls up. A conversation
        shorter than the view is never anchored: an anchored one is drawn against the bottom."""
        conv = self.conversation
        want = self._following and conv.max_scroll_y > 0
        if want != conv.is_anchored:
            conv.anchor(want)
            if not want and conv.scroll_y < 0:
                conv.scroll_to(y=0, animate=False)

    async def _stop_stream(self) -> None:
        # The streamed piece is already the settled widget: the next text starts a new one.
        self._md = None
        self._md_source = ""

    async def _end_stream(self) -> None:
        await self._flush_text()
        async with self._flush_lock:
            await self._stop_stream()

    # -- the worker ------------------------------------------------------------------------------
    def sink(self, e: Any) -> None:
        if isinstance(e, ev.TextDelta):
            # Streamed text is buffered, never waited on: the timer puts it on screen.
            with self._text_lock:
                self._pending_text.append(e.text)
            return
        self._post(self.handle_event, e)

    def start_work(self, label: str, fn: Callable[[], Any], after: Callable[[Any], None] | None = None) -> None:
        self.busy = label
        self.cancel.clear()
        self.refresh_status()

        def target() -> None:
            result = None
            try:
                result = fn()
            except Interrupted:
                self._post(self.notice, "interrupted — everything done so far is kept", "warning")
            except CudaAgentError as exc:
                self._post(self.notice, exc.one_line(), "error")
            except Exception as exc:  # a bug must not end the app
                self._post(self.notice, f"internal error: {type(exc).__name__}: {exc}", "error")
            self._post(self._work_done, result, after)

        self._thread = threading.Thread(target=target, name="cuda-agent-worker", daemon=True)
        self._thread.start()

    async def _work_done(self, result: Any, after: Callable[[Any], None] | None) -> None:
        await self._end_stream()
        self._streamed = False
        self.busy = None
        self._event_session = None
        self.refresh_status()
        if after is not None and result is not None:
            try:
                after(result)
            except CudaAgentError as exc:
                self.notice(exc.one_line(), "error")
        if self.queue and not self.busy and not self.review_open:
            self.send(self.queue.popleft())

    def ask(self, request: ApprovalRequest) -> Decision:
        """Called by the permission gate in the worker thread: a modal, answered in the app thread."""
        done = threading.Event()
        box: dict[str, Decision] = {}

        def answered(decision: Decision | None) -> None:
            box["d"] = decision or Decision("deny")
            done.set()

        from cuda_agent_cli.tui.screens import ApprovalScreen

        self._post(self.push_screen, ApprovalScreen(request), answered)
        while not done.wait(0.1):
            if self.cancel.is_set():
                self._post(self._drop_approval)
                return Decision("deny")
        decision = box.get("d", Decision("deny"))
        if decision.choice == "session":
            from cuda_agent_cli.tui.approval import session_grant

            self._post(
                self.notice,
                f"allowed for the rest of this session: {session_grant(request)} (/mode ask asks again)",
                "warning",
            )
        return decision

    def _drop_approval(self) -> None:
        from cuda_agent_cli.tui.screens import ApprovalScreen

        if isinstance(self.screen, ApprovalScreen):
            self.screen.dismiss(Decision("deny"))

    # -- the prompt ------------------------------------------------------------------------------
    def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        self._hide_completions()
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

        def turn() -> Any:
            try:
                return self.runtime.send(text, self.sink, self.cancel)
            finally:
                self.runtime.take_file_backups()

        self.start_work("working", turn)

    def run_shell(self, command: str) -> None:
        if self.busy:
            self.notice("!commands wait until the agent is done (Esc interrupts it)", "warning")
            return
        self.add(UserTurn("!" + command))
        line = ToolCallLine(f"shell-{time.monotonic()}", "Bash", {"command": command})
        self.add(line)
        line.set_status("running")
        t0 = time.monotonic()

        def run() -> Any:
            return self.runtime.run_shell(command)

        def show(result: Any) -> None:
            line.expanded = True
            line.set_status("error" if result.is_error else "ok", result.output, time.monotonic() - t0)

        self.start_work("running !" + command.split()[0], run, show)

    def on_text_area_changed(self, message: TextArea.Changed) -> None:
        self._update_completions(message.text_area.text)

    def _update_completions(self, text: str) -> None:
        from textual.widgets.option_list import Option

        box = self.completions_box
        prompt = self.query_one("#prompt", PromptArea)
        options: list[Option] = []
        if text.startswith("/") and " " not in text and "\n" not in text:
            for c in commands.completions(text):
                options.append(
                    Option(
                        Text.assemble((f"/{c.name} ", "bold"), (c.usage + "  ", "cyan"), (c.description, "dim")),
                        id=f"/{c.name} ",
                    )
                )
        else:
            partial = mentions.trailing_mention(text)
            if partial is not None:
                if self._files is None:
                    self._files = mentions.repo_files(self.runtime.root)
                for f in mentions.complete(partial, self._files):
                    options.append(Option(f"@{f}", id=f"@{f}"))
        box.clear_options()
        if options:
            box.add_options(options)
            box.highlighted = 0
        box.display = bool(options)
        prompt.completing = bool(options)

    def _hide_completions(self) -> None:
        for box in self.query("#completions"):
            box.display = False
        self.query_one("#prompt", PromptArea).completing = False

    def accept_completion(self) -> None:
        box = self.completions_box
        prompt = self.query_one("#prompt", PromptArea)
        if box.highlighted is None:
            return
        choice = box.get_option_at_index(box.highlighted).id or ""
        text = prompt.text
        if choice.startswith("/"):
            new = choice
        else:
            partial = mentions.trailing_mention(text) or ""
            new = text[: len(text) - len(partial) - 1] + choice + " "
        prompt.load_text(new)
        prompt.move_cursor(prompt.document.end)
        self._hide_completions()

    def move_completion(self, step: int) -> None:
        box = self.completions_box
        if box.option_count:
            box.highlighted = ((box.highlighted or 0) + step) % box.option_count

    # -- keys ------------------------------------------------------------------------------------
    def action_interrupt(self) -> None:
        if any(box.display for box in self.query("#completions")):
            self._hide_completions()
            return
        if self.busy:
            self.cancel.set()
            self.notice("interrupting… (the running tool finishes first)", "warning")

    def action_scroll_conversation(self, where: int) -> None:
        """PageUp/PageDown a page, Ctrl+Home/Ctrl+End to either end (the prompt keeps the focus)."""
        if self.screen is self.screen_stack[0]:
            conv: Any = self.conversation
            self._following = where == 2 or (where == 1 and conv.scroll_y >= conv.max_scroll_y - conv.size.height)
        else:  # the review, the help or an approval: scroll what that screen shows
            found = self.screen.query(VerticalScroll)
            if not found:
                return
            conv = found.first()
        if where == -2:
            if conv is self.conversation and conv.scroll_y <= 0:
                self.load_older()
            conv.scroll_home(animate=False)
        elif where == 2:
            conv.scroll_end(animate=False)
        elif where < 0:
            if conv is self.conversation and conv.scroll_y <= 0:
                self.load_older()
            conv.scroll_page_up(animate=False)
        else:
            conv.scroll_page_down(animate=False)

    def on_mouse_scroll_up(self, _event: Any) -> None:
        self._following = False

    def on_mouse_scroll_down(self, _event: Any) -> None:
        conv = self.conversation
        self.call_after_refresh(lambda: setattr(self, "_following", conv.scroll_y >= conv.max_scroll_y - 2))

    def tool_lines(self) -> list[ToolCallLine]:
        return [line for line in self.conversation.query(ToolCallLine) if line.display]

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
                prompts = self.query("#prompt")
                if prompts:
                    self._following = True
                    prompts.first().focus()
                    self.call_after_refresh(self.conversation.scroll_end, animate=False)
                return bool(prompts)
            if j < 0:
                return False
            target = lines[j]
        self._following = False  # the conversation stays where the focused call is
        target.focus()
        return True

    def on_descendant_focus(self, _event: Any) -> None:
        self.refresh_status()

    def keys_hint(self) -> str | None:
        """The keys for what has the focus, at the end of the status bar."""
        if isinstance(self.focused, ToolCallLine):
            return "tool call: Enter/Space output · ↑/↓ Shift+Tab/Tab move · type to write"
        if self.query("#prompt") and self._calls_shown():
            return "Shift+Tab: tool calls"
        return None

    def _calls_shown(self) -> bool:
        return bool(self._conversation is not None and self.conversation.query(ToolCallLine))

    def action_toggle_ledger(self) -> None:
        ledger = self.ledger_panel
        ledger.display = not ledger.display
        ledger.show(self.runtime.ledger)
        self._keep_end()

    def _keep_end(self) -> None:
        """The conversation's width changed (ledger, terminal): stay at the end if following."""
        if self._following:
            self.call_after_refresh(self.conversation.scroll_end, animate=False)

    def action_quit_twice(self) -> None:
        now = time.monotonic()
        if now - self._ctrl_c_at <= QUIT_WINDOW_S:
            self.quit_saving()
            return
        self._ctrl_c_at = now
        self.notify("Press Ctrl+C again to quit (the session is saved)", timeout=QUIT_WINDOW_S)

    def finish_work(self, timeout: float) -> None:
        """After the app closed: stop a running turn and wait for it to write its last events."""
        self.cancel.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout)

    def quit_saving(self) -> None:
        self.cancel.set()
        self.exit(0)

    # -- slash commands --------------------------------------------------------------------------
    def run_command(self, line: str) -> None:
        try:
            parsed = commands.parse(line)
        except commands.UnknownCommand as exc:
            self.notice(str(exc), "error")
            return
        cmd = parsed.command
        if self.busy and not cmd.while_busy:
            self.notice(f"/{cmd.name} cannot run while the agent works — wait, or press Esc to interrupt", "warning")
            return
        handler = getattr(self, f"cmd_{cmd.name}")
        try:
            handler(parsed.args, parsed.raw_args)
        except CudaAgentError as exc:
            self.notice(exc.one_line(), "error")

    def cmd_help(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.tui.screens import HelpScreen

        self.push_screen(HelpScreen())

    def cmd_quit(self, args: list[str], raw: str) -> None:
        self.quit_saving()

    def cmd_cost(self, args: list[str], raw: str) -> None:
        rt = self.runtime
        lines = [f"this chat: ${rt.state.cost_usd:.4f} over {rt.state.turns} turns, {self.tokens:,} tokens in all"]
        for sid, cost in self._session_costs.items():
            if sid != rt.session_id:
                lines.append(f"optimize session {sid}: ${cost:.4f}")
        self.notice("\n".join(lines))

    def cmd_context(self, args: list[str], raw: str) -> None:
        rt = self.runtime
        pct = 100.0 * rt.context_tokens / (rt.context_budget or 1)
        self.notice(
            f"context: about {rt.context_tokens:,} of {rt.context_budget:,} tokens ({pct:.0f}%); "
            f"{len(rt.state.messages)} messages, {rt.state.compactions} compactions. /compact frees room."
        )

    def cmd_model(self, args: list[str], raw: str) -> None:
        if not args:
            self.notice(f"model: {self.runtime.model_string}")
            return
        name = args[0]
        self.notice(f"checking model {name}…")

        def check() -> str:
            self.runtime.set_model(name)  # the model check may ask the network: not on this thread
            return name

        def done(name: str) -> None:
            self.notice(f"model is now {name} for the next turns")
            self.refresh_status()

        self.start_work("checking model", check, done)

    def cmd_mode(self, args: list[str], raw: str) -> None:
        if not args:
            self.notice(f"permission mode: {self.runtime.permissions.mode} (ask, accept-edits or yolo)")
            return
        self.runtime.set_mode(args[0])
        self.notice(f"permission mode is now {args[0]}")
        self.refresh_status()

    def cmd_clear(self, args: list[str], raw: str) -> None:
        self.conversation.remove_children()
        self._calls.clear()
        self.notice("cleared the screen; the transcript keeps everything")

    def cmd_diff(self, args: list[str], raw: str) -> None:
        d = self.runtime.session_diff()
        if d is None:
            self.notice(f"{self.runtime.root} is not a git repository, so there is no diff to show", "warning")
            return
        since = f"commit {d.base[:10]}" if d.base else "an empty repository"
        if d.patch.strip():
            self.notice(f"what this session changed since it started ({since}; new files included):")
            self.add(Static(render.diff_view(d.patch), classes="diff"))
        else:
            self.notice(f"this session has not changed the repository since it started ({since})")
        if d.left_out:
            shown = ", ".join(d.left_out[:8]) + (f" and {len(d.left_out) - 8} more" if len(d.left_out) > 8 else "")
            self.notice(
                f"left out {len(d.left_out)} files that already had uncommitted changes when the session "
                f"started: {shown}",
                "warning",
            )

    def _harness(self, tool: str) -> None:
        harness, sid = self.runtime.harness_for_last()

        def run() -> Any:
            from cuda_agent_cli.workspace import candidate_digest

            return (
                (harness.verify() if tool == "Verify" else harness.profile()).to_json(),
                candidate_digest(harness.workspace.root),
            )

        def show(done: tuple[dict[str, Any], str | None]) -> None:
            result, sources = done
            judged = self.runtime.record_result(sid, tool, 0, result, sources)
            self.add(HarnessCard(tool, result, self.runtime.ledger.best() is judged, judged.candidate))
            self.ledger_panel.show(self.runtime.ledger)
            self.refresh_status()

        self.notice(f"{tool.lower()}ing the candidate of session {sid}…")
        self.start_work(tool.lower(), run, show)

    def cmd_verify(self, args: list[str], raw: str) -> None:
        self._harness("Verify")

    def cmd_profile(self, args: list[str], raw: str) -> None:
        self._harness("Profile")

    def cmd_sessions(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.agent.session_store import list_sessions

        found = list_sessions(self.runtime.opts.data_dir)[:20]
        if not found:
            self.notice("no stored sessions")
            return
        from rich.table import Table

        table = Table(box=None, padding=(0, 2), show_header=True)
        for col in ("id", "kind", "date", "target", "status", "turns", "cost"):
            table.add_column(col)
        for s in found:
            table.add_row(
                *(
                    Text(v)
                    for v in (
                        s.session_id,
                        s.kind,
                        s.created.replace("T", " "),
                        s.target[:40],
                        s.status,
                        str(s.turns),
                        f"${s.cost_usd:.4f}",
                    )
                )
            )
        self.add(Static(table, classes="notice"))
        self.notice("/resume ID opens a chat session")

    def cmd_resume(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.errors import BadInput
        from cuda_agent_cli.tui.runtime import ChatOptions, ChatRuntime

        if not args:
            raise BadInput("/resume needs a session id", "/sessions lists them")
        old = self.runtime
        opts = ChatOptions(
            path=None,
            model=None,
            api_base=old.opts.api_base,
            mode=old.permissions.mode,
            resume=args[0],
            device=old.opts.device,
            policy=old.opts.policy,
            allow_unsafe=old.opts.allow_unsafe,
            data_dir=old.opts.data_dir,
        )
        self.notice(f"opening session {args[0]}…")

        def opened(new: Any) -> None:
            old.close()
            self.runtime = new
            self.conversation.remove_children()
            self._calls.clear()
            self._session_costs.clear()
            self.tokens = 0
            self._files = None
            self._load_history()
            self.ledger_panel.show(new.ledger)
            self.refresh_status()

        # Opening a session checks its model and sandbox: seconds, so not on this thread.
        self.start_work("opening session", lambda: ChatRuntime(opts), opened)

    def cmd_export(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.tui.export import export_transcript

        rt = self.runtime
        dest = Path(args[0]).expanduser() if args else rt.state.session_dir / "transcript.md"
        if not dest.is_absolute():
            dest = rt.root / dest
        export_transcript(rt.state.transcript_path, dest, f"cuda-agent chat {rt.session_id}")
        self.notice(f"exported the conversation to {dest}")

    def cmd_compact(self, args: list[str], raw: str) -> None:
        self.notice(self.runtime.compact())
        self.refresh_status()

    def cmd_undo(self, args: list[str], raw: str) -> None:
        self.lasting_notice(self.runtime.undo())
        self.ledger_panel.show(self.runtime.ledger)  # an undone kernel is no longer the best
        self.refresh_status()

    def cmd_ledger(self, args: list[str], raw: str) -> None:
        self.action_toggle_ledger()

    def cmd_optimize(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.tui.runtime import parse_optimize_args

        parse_optimize_args(args)  # a bad line is refused before anything starts
        self.add(UserTurn("/optimize " + raw))
        self.runtime.record_note("/optimize " + raw, "user")
        self.runtime.permissions.ask = self.ask

        def run() -> Any:
            return self.runtime.optimize(
                args, self.sink, self.cancel, on_stage=lambda msg: self._post(self.notice, msg)
            )

        self.start_work("optimizing", run, self.review)

    def review(self, outcome: Any) -> None:
        """After /optimize: the review screen when there is a correct kernel to write back."""
        if outcome.plan is None:
            self.lasting_notice(
                f"no correct kernel in this run (stopped: {outcome.stop_reason}); nothing to review", "warning"
            )
            return
        self.review_open = True

        def decided(apply: bool | None) -> None:
            self.review_open = False
            self._following = True
            if apply and outcome.status != "improved":
                # The same rule as `cuda-agent optimize`: only a measured improvement lands.
                from cuda_agent_cli.run.optimize import not_applied

                self.lasting_notice(f"not applied: {not_applied(outcome)}", "warning")
            elif apply:
                try:
                    result = self.runtime.apply(outcome.plan, outcome.session_id)
                except CudaAgentError as exc:
                    self.lasting_notice(f"not applied: {exc.one_line()}", "error")
                else:
                    if result.commit:
                        self.lasting_notice(
                            f"applied: committed {result.commit[:10]} on new branch {result.branch} "
                            f"({len(result.written)} files; /undo reverts it)",
                            "success",
                        )
                    else:
                        self.lasting_notice(f"applied: wrote {len(result.written)} files (not committed)", "success")
                    for n in result.notes:
                        self.lasting_notice(n, "warning")
            else:
                self.lasting_notice("discarded: nothing was written into the repository")
            if self.queue and not self.busy:
                self.send(self.queue.popleft())

        from cuda_agent_cli.tui.screens import ReviewScreen

        self.push_screen(ReviewScreen(outcome), decided)
