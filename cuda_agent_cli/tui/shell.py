"""The frame every agent app on a terminal has, over one `chat.backend.ChatBackend`: the parts
it holds and the messages it answers. `app.ChatApp` (a chat) and `task.OptimizeApp` (one optimize
session) compose their screens from these parts and add what is theirs (a prompt and its
commands; optimize's keys line and its one run); nothing here waits to be overridden.

The parts: the conversation (`conversation.Conversation`), the status bar
(`status_bar.StatusBar`), the ledger panel (`ledger_panel.LedgerPanel`, mounted after the first
frame), the worker (`work.Work`), the keys typed ahead (`typeahead.TypeAhead`), and the screens
(`screens`). The backend talks to the view only through the worker's messages: `Work.Told`
carries an agent event (what it says about sessions goes to the backend, what it shows to the
conversation), a `Note`, or a `PendingApproval` (the approval screen, whose answer resolves the
pending question's future); `Work.Done` ends a job. Then the app hears `Settled`.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Generic, TypeVar

from rich.text import Text
from textual import events
from textual.app import App
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.widget import AwaitMount, Widget
from textual.widgets import Static

from cuda_agent_cli.agent import events as ev
from cuda_agent_cli.chat.approval import Decision, PendingApproval
from cuda_agent_cli.chat.backend import ChatBackend, Note
from cuda_agent_cli.errors import CudaAgentError
from cuda_agent_cli.tui import render
from cuda_agent_cli.tui.conversation import Conversation
from cuda_agent_cli.tui.status_bar import StatusBar
from cuda_agent_cli.tui.typeahead import TypeAhead
from cuda_agent_cli.tui.widgets import HarnessCard, Notice
from cuda_agent_cli.tui.work import Job, Work

if TYPE_CHECKING:  # imported when first needed, after the first frame
    from cuda_agent_cli.chat.ledger import Judged
    from cuda_agent_cli.run.optimize import OptimizeOutcome
    from cuda_agent_cli.tui.ledger_panel import LedgerPanel
    from cuda_agent_cli.tui.screens import ApprovalScreen

BackendT = TypeVar("BackendT", bound=ChatBackend)

SETTLE_S = 0.5  # after the first frame: the collector's settings and the renderer's warm-up
QUIT_WINDOW_S = 3.0


def detect_device() -> str:
    """The GPU's name when one is visible, else cpu (no torch import: that costs seconds and memory)."""
    from cuda_agent_cli.machine import this_machine

    gpu = this_machine().gpu_for()  # what machine.pick_device decides on
    return f"cuda ({gpu.name})" if gpu else "cpu"


class AgentShell(App[int], Generic[BackendT]):
    CSS_PATH = "chat.tcss"
    TITLE = "cuda-agent"
    NAME = "cuda-agent chat"  # what the "terminal too small" message names
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

    class Opened(Message):
        """The frame is on screen with the backend's opening: the app's own start follows."""

    class Settled(Message):
        """A job ended and what it left is shown: nothing runs now."""

    class DeviceFound(Message):
        def __init__(self, label: str) -> None:
            super().__init__()
            self.label = label

    class Withdrawn(Message):
        """An approval's question was withdrawn (the turn was interrupted)."""

        def __init__(self, screen: ApprovalScreen) -> None:
            super().__init__()
            self.screen = screen

    def __init__(
        self,
        backend: BackendT,
        *,
        detect: Callable[[], str] = detect_device,
        banner: str | None = None,
        ledger_open: bool = False,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.detect = detect
        self.conversation = Conversation()
        self.status_bar = StatusBar(self.conversation, banner)
        self.status_bar.device = backend.device or "…"
        self.too_small = Static(id="too-small")
        self.ledger_open = ledger_open  # whether the ledger shows from the start (Ctrl+L toggles it)
        self.work = Work(self, self.conversation.buffer_text)
        self.keys = TypeAhead(self, super().on_event)
        self.event_session: str | None = None  # the session the running job's events belong to
        self.review_open = False
        self._ledger: LedgerPanel | None = None
        self._ctrl_c_at = 0.0

    @property
    def busy(self) -> str | None:
        """What runs now (the status bar's word for it), or None."""
        return self.work.busy

    # -- the terminal ----------------------------------------------------------------------------
    def get_driver_class(self) -> Any:
        """textual's driver, on a Linux terminal with Escape followed by typed-ahead text kept
        apart (tui/terminal_input.py); TEXTUAL_DRIVER still picks another."""
        from textual import constants

        base = super().get_driver_class()
        if constants.DRIVER is not None:
            return base
        from cuda_agent_cli.tui.terminal_input import chat_driver

        return chat_driver(base)

    async def on_event(self, event: events.Event) -> None:
        if not await self.keys.take(event):
            await super().on_event(event)

    # -- start -----------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.too_small.display = False
        self.show_opening()
        self.refresh_status()
        self._check_size()
        if self.backend.device is None:
            threading.Thread(target=self._detect_device, daemon=True).start()
        self.post_message(self.Opened())

    def show_opening(self) -> None:
        """What the backend opens with: a resumed session's history, or the line that says what this is."""
        opening = self.backend.opening()
        line: str | Text = Text.assemble((opening.title, "bold"), opening.line) if opening.title else opening.line
        self.conversation.forget_history()
        if opening.items is None:
            self.notice(line)
        else:
            self.conversation.show_history(opening.items, line)

    def _detect_device(self) -> None:
        self.post_message(self.DeviceFound(self.detect()))

    def on_agent_shell_device_found(self, message: DeviceFound) -> None:
        self.set_device(message.label)

    def set_device(self, label: str) -> None:
        self.status_bar.device = label
        self.refresh_status()

    def on_ready(self) -> None:
        """textual's Ready: the first frame is on the terminal."""
        self.mount_ledger()
        self.set_timer(SETTLE_S, self._settle)

    def _settle(self) -> None:
        """Work done once the first frames are drawn (the ledger's comes a frame or two after
        the first): the collector's settings, and the Markdown renderer warmed in a thread for
        the first reply."""
        from cuda_agent_cli.tui import gc_policy, markdown_blocks

        gc_policy.tune_after_first_frame()
        threading.Thread(target=markdown_blocks.warm_up, name="cuda-agent-warm-up", daemon=True).start()

    def mount_ledger(self) -> LedgerPanel:
        """The ledger panel beside the conversation, mounted by whoever needs it first (after
        the first frame, so its imports and CSS do not delay it)."""
        if self._ledger is None:
            from cuda_agent_cli.tui.ledger_panel import LedgerPanel

            self._ledger = LedgerPanel(id="ledger")
            self._ledger.display = self.ledger_open
            self._ledger.show(self.backend.ledger)
            self.conversation.parent.mount(self._ledger)  # type: ignore[union-attr]
        return self._ledger

    @property
    def ledger_panel(self) -> LedgerPanel:
        return self.mount_ledger()

    # -- size ------------------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self._check_size(event.size)
        self.conversation.keep_end()

    def _check_size(self, size: Size | None = None) -> None:
        """Below the minimum size the main screen shows only the message saying so. What the
        app composed is hidden; the completion popup keeps its own display, and textual's own
        layers (tooltips, toasts) are textual's."""
        w, h = size or self.size
        small = render.is_too_small(w, h)
        for part in self.screen_stack[0].children:
            if part is self.too_small:
                part.display = small
            elif part.id != "completions" and not part.has_class("-textual-system"):
                part.display = not small
        if small:
            self.too_small.update(render.too_small(w, h, self.NAME))

    # -- what the conversation shows -------------------------------------------------------------
    def add(self, widget: Widget) -> AwaitMount:
        """Append to the conversation (following it when it was at the end); awaitable."""
        return self.conversation.add(widget)

    def notice(self, text: str | Text, kind: str = "info") -> None:
        self.add(Notice(text, kind))

    def lasting_notice(self, text: str, kind: str = "info") -> None:
        """A notice the backend keeps (a resumed chat shows it again; no transcript holds it)."""
        self.notice(text, kind)
        self.backend.record_note(text, kind)

    def refresh_status(self) -> None:
        self.status_bar.busy = self.work.busy
        self.status_bar.show(self.backend)

    def on_descendant_focus(self, _event: Any) -> None:
        self.refresh_status()

    # -- the worker and what it tells ------------------------------------------------------------
    def start_work(self, label: str, run: Callable[[], Any], after: Callable[[Any], None] | None = None) -> None:
        """`run` in the worker thread, the status bar saying `label`; `after` gets its result here."""
        self.work.start(Job(label, run, after))
        self.refresh_status()

    async def on_work_told(self, message: Work.Told) -> None:
        try:
            item = message.item
            if isinstance(item, PendingApproval):
                self.ask(item)
            elif isinstance(item, Note):
                self.notice(item.text, item.kind)
            else:
                await self.show_event(item)
        finally:
            message.handled.set()

    async def show_event(self, e: ev.Event) -> None:
        """An agent event: what it says about sessions goes to the backend, what it shows to the
        conversation (each kind has one handler); then the status bar."""
        handler = self.EVENTS.get(type(e))
        if handler is not None:
            await handler(self, e)
        else:
            await self.conversation.show(e)
        self.refresh_status()

    async def _session_started(self, e: ev.SessionStarted) -> None:
        self.event_session = e.session_id
        if self.backend.session_started(e):
            self.notice(f"optimize session {e.session_id} started for {e.target}")

    async def _resumed(self, e: ev.Resumed) -> None:
        self.event_session = self.backend.resumed(e)

    async def _harness_result(self, e: ev.HarnessResultEvent) -> None:
        self.show_result(self.event_session or self.backend.session_id, e)

    async def _cost(self, e: ev.CostUpdate) -> None:
        self.backend.record_cost(self.event_session or self.backend.session_id, e)

    EVENTS: ClassVar[dict[type[ev.Event], Callable[[Any, Any], Awaitable[None]]]] = {
        ev.SessionStarted: _session_started,
        ev.Resumed: _resumed,
        ev.HarnessResultEvent: _harness_result,
        ev.CostUpdate: _cost,
    }

    def show_result(self, session_id: str, e: ev.HarnessResultEvent) -> Judged:
        """A harness result (the agent's, or /verify's and /profile's): into the ledger, and its card."""
        judged = self.backend.record_result(session_id, e)
        self.add(HarnessCard(judged, self.backend.ledger.best() is judged))
        self.ledger_panel.show(self.backend.ledger)
        return judged

    async def on_work_done(self, message: Work.Done) -> None:
        await self.conversation.end_turn()
        if message.failure is not None:
            self.notice(message.failure.text, message.failure.kind)
        self.work.done()
        self.event_session = None
        self.refresh_status()
        after = message.job.after
        if after is not None and message.result is not None:
            try:
                after(message.result)
            except CudaAgentError as exc:
                self.notice(exc.one_line(), "error")
        self.post_message(self.Settled())

    # -- approvals -------------------------------------------------------------------------------
    def ask(self, pending: PendingApproval) -> None:
        """The approval screen for a question the gate waits on; its answer resolves the
        question's future. A question withdrawn meanwhile takes the screen down."""
        from cuda_agent_cli.tui.screens import ApprovalScreen

        screen = ApprovalScreen(pending.request)

        def answered(decision: Decision | None) -> None:
            decision = decision or Decision("deny")
            if pending.decide(decision) and decision.choice == "session":
                from cuda_agent_cli.chat.approval import session_grant

                self.notice(
                    f"allowed for the rest of this session: {session_grant(pending.request)} (/mode ask asks again)",
                    "warning",
                )

        pending.answer.add_done_callback(lambda f: f.cancelled() and self.post_message(self.Withdrawn(screen)))
        self.push_screen(screen, answered)

    def on_agent_shell_withdrawn(self, message: Withdrawn) -> None:
        message.screen.withdraw()

    # -- the review ------------------------------------------------------------------------------
    def review(
        self,
        outcome: OptimizeOutcome,
        no_kernel: str,
        answered: Callable[[bool], None],
        *,
        ask: bool = True,
        refused: str | None = None,
    ) -> None:
        """What a run made, before anything is written: `no_kernel` (kept by the backend) when it
        left no correct kernel, else the review screen (speedup table and full diff; taken as a
        yes unasked without `ask`), whose answer goes to `answered`. `refused`: why y cannot apply."""
        if outcome.plan is None:
            self.lasting_notice(no_kernel, "warning")
            return
        if not ask:
            answered(True)
            return
        self.review_open = True

        def decided(apply: bool | None) -> None:
            self.review_open = False
            self.conversation.following = True
            answered(bool(apply))

        from cuda_agent_cli.tui.screens import ReviewScreen

        self.push_screen(ReviewScreen(outcome, refused=refused), decided)

    # -- keys ------------------------------------------------------------------------------------
    def action_interrupt(self) -> None:
        if self.work.busy:
            self.work.cancel.set()
            self.notice("interrupting… (the running tool finishes first)", "warning")

    def action_scroll_conversation(self, where: int) -> None:
        """PageUp/PageDown a page, Ctrl+Home/Ctrl+End to either end (the prompt keeps the focus)."""
        if self.screen is self.screen_stack[0]:
            self.conversation.page(where)
            return
        found = self.screen.query(VerticalScroll)  # the review, the help or an approval: scroll what it shows
        if not found:
            return
        view = found.first()
        if where == -2:
            view.scroll_home(animate=False)
        elif where == 2:
            view.scroll_end(animate=False)
        elif where < 0:
            view.scroll_page_up(animate=False)
        else:
            view.scroll_page_down(animate=False)

    def on_mouse_scroll_up(self, _event: Any) -> None:
        self.conversation.following = False

    def on_mouse_scroll_down(self, _event: Any) -> None:
        conv = self.conversation
        self.call_after_refresh(lambda: setattr(conv, "following", conv.scroll_y >= conv.max_scroll_y - 2))

    def action_toggle_ledger(self) -> None:
        ledger = self.ledger_panel
        ledger.display = not ledger.display
        ledger.show(self.backend.ledger)
        self.conversation.keep_end()

    def action_quit_twice(self) -> None:
        now = time.monotonic()
        if now - self._ctrl_c_at <= QUIT_WINDOW_S:
            self.quit_saving()
            return
        self._ctrl_c_at = now
        self.notify("Press Ctrl+C again to quit (the session is saved)", timeout=QUIT_WINDOW_S)

    def quit_saving(self) -> None:
        """Stop what runs (its backend records the stop: a chat turn is kept, an optimize
        session ends as interrupted) and close."""
        self.work.cancel.set()
        self.exit(0)

    def finish_work(self, timeout: float) -> None:
        """After the app closed: stop a running job and wait for it to write its last events."""
        self.work.finish(timeout)
