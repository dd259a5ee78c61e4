"""The screen every agent run on a terminal has: the conversation, the kernel ledger and the
status bar over one `chat.backend.ChatBackend`, the worker thread that runs the agent, the
approval modal and the review. `app.ChatApp` (a chat) and `task.OptimizeApp` (one optimize
session) are this app with their own backend, bottom line and work.

The agent runs in a worker thread; its events reach this thread through `call_from_thread` and
go to their handler (`EVENTS`): what they say about sessions to the backend, what they show to
the conversation. Nothing the worker raises ends the app: errors become lines in the
conversation.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Generic, TypeVar

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.widget import AwaitMount, Widget
from textual.widgets import Static

from cuda_agent_cli.agent import events as ev
from cuda_agent_cli.chat.approval import ApprovalRequest, Decision
from cuda_agent_cli.chat.backend import ChatBackend
from cuda_agent_cli.errors import CudaAgentError, Interrupted
from cuda_agent_cli.tui import render
from cuda_agent_cli.tui.conversation import FLUSH_HZ, Conversation
from cuda_agent_cli.tui.typeahead import TypeAheadApp
from cuda_agent_cli.tui.widgets import HarnessCard, Notice, PromptArea, ToolCallLine

if TYPE_CHECKING:  # imported when first needed, after the first frame
    from cuda_agent_cli.chat.ledger import Judged
    from cuda_agent_cli.run.optimize import OptimizeOutcome
    from cuda_agent_cli.tui.completions import Completions
    from cuda_agent_cli.tui.ledger_panel import LedgerPanel

BackendT = TypeVar("BackendT", bound=ChatBackend)

SETTLE_S = 0.5  # after the first frame: the collector's settings and the renderer's warm-up
QUIT_WINDOW_S = 3.0


def detect_device() -> str:
    """The GPU's name when one is visible, else cpu (no torch import: that costs seconds and memory)."""
    from cuda_agent_cli.machine import this_machine

    gpu = this_machine().gpu_for()  # what machine.pick_device decides on
    return f"cuda ({gpu.name})" if gpu else "cpu"


class AgentApp(TypeAheadApp, Generic[BackendT]):
    CSS_PATH = "chat.tcss"
    TITLE = "cuda-agent"
    NAME = "cuda-agent chat"
    LAYOUT: ClassVar[tuple[str, ...]] = ("#main", "#prompt", "#status")  # hidden while the terminal is too small
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

    def __init__(self, runtime: BackendT, detect: Callable[[], str] = detect_device, banner: str | None = None) -> None:
        super().__init__()
        self.runtime = runtime
        self.detect = detect
        self.banner = banner
        self.cancel = threading.Event()
        self.busy: str | None = None
        self.queue: deque[str] = deque()  # messages typed while busy (only a prompt queues any)
        self.device_label = runtime.device or "…"
        self._conversation: Conversation | None = None
        self._event_session: str | None = None  # the session the worker's events belong to
        self._ctrl_c_at = 0.0
        self._thread: threading.Thread | None = None
        self.review_open = False
        self.ask_to_apply = True  # False: a kernel to review is taken as a yes, without the screen
        self.refused: str | None = None  # why y cannot apply, shown on the review screen
        self._later_done = False

    # -- layout ----------------------------------------------------------------------------------
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
        """What the app does once mounted: the opening, the status bar, the prompt's focus, the
        stream's timer, the device, then `begin` (a subclass's on_mount would run beside this)."""
        self.query_one("#too-small").display = False
        self.show_opening()
        self.refresh_status()
        for prompt in self.query("#prompt"):
            prompt.focus()
        self.set_interval(1 / FLUSH_HZ, self.conversation.flush_text)
        self._check_size()
        if self.runtime.device is None:
            threading.Thread(target=self._detect_device, daemon=True).start()
        self.begin()

    def begin(self) -> None:
        """The app's own start, once it shows (the chat's first messages, optimize's session)."""

    def show_opening(self) -> None:
        """What the backend opens with: a resumed session's history, or the line that says what this is."""
        opening = self.runtime.opening()
        line: str | Text = Text.assemble((opening.title, "bold"), opening.line) if opening.title else opening.line
        self.conversation.forget_history()
        if opening.items is None:
            self.notice(line)
        else:
            self.conversation.show_history(opening.items, line)

    def _detect_device(self) -> None:
        label = self.detect()
        self._post(self._set_device, label)

    def _set_device(self, label: str) -> None:
        self.device_label = label
        self.refresh_status()

    def on_resize(self, event: events.Resize) -> None:
        self._check_size(event.size)
        self.conversation.keep_end()

    def _check_size(self, size: Size | None = None) -> None:
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
        """The ledger panel and the prompt's completion popup; whoever needs one first mounts it."""
        if self._later_done:
            return
        self._later_done = True
        from cuda_agent_cli.tui.ledger_panel import LedgerPanel

        panel = LedgerPanel(id="ledger")
        panel.display = self.LEDGER_OPEN
        panel.show(self.runtime.ledger)
        self.query_one("#main").mount(panel)
        if self.query("#prompt"):
            from cuda_agent_cli.tui.completions import Completions

            self.mount(Completions(), before="#prompt")

    @property
    def ledger_panel(self) -> LedgerPanel:
        from cuda_agent_cli.tui.ledger_panel import LedgerPanel

        self.mount_later()
        return self.query_one("#ledger", LedgerPanel)

    @property
    def completions_box(self) -> Completions:
        from cuda_agent_cli.tui.completions import Completions

        self.mount_later()
        return self.query_one("#completions", Completions)

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def conversation(self) -> Conversation:
        # Kept once found: a timer still asks while the app closes, its widgets already gone.
        if self._conversation is None:
            self._conversation = self.query_one("#conversation", Conversation)
        return self._conversation

    def _post(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn` in the app thread from a worker; quietly nothing once the app has closed."""
        try:
            return self.call_from_thread(fn, *args)
        except RuntimeError:
            return None

    def add(self, widget: Widget) -> AwaitMount:
        """Append to the conversation (following it when it was at the end); awaitable."""
        return self.conversation.add(widget)

    def notice(self, text: str | Text, kind: str = "info") -> None:
        self.add(Notice(text, kind))

    def lasting_notice(self, text: str, kind: str = "info") -> None:
        """A notice the backend keeps (a resumed chat shows it again; no transcript holds it)."""
        self.notice(text, kind)
        self.runtime.record_note(text, kind)

    def refresh_status(self) -> None:
        rt = self.runtime
        self.query_one("#status", Static).update(
            render.status_text(
                model=rt.model_string,
                device=self.device_label,
                mode=rt.mode,
                context_pct=100.0 * rt.context_tokens / (rt.context_budget or 1),
                tokens=rt.tokens,
                cost=rt.cost_usd,
                best=rt.ledger.best_verified_speedup(),
                busy=self.busy,
                queued=len(self.queue),
                banner=self.banner,
                keys=self.keys_hint(),
            )
        )

    def keys_hint(self) -> str | None:
        """The keys for what has the focus, at the end of the status bar."""
        if isinstance(self.focused, ToolCallLine):
            return "tool call: Enter/Space output · ↑/↓ Shift+Tab/Tab move · type to write"
        if self.query("#prompt") and self._conversation is not None and self.conversation.query(ToolCallLine):
            return "Shift+Tab: tool calls"
        return None

    # -- agent events (app thread) ---------------------------------------------------------------
    async def handle_event(self, e: ev.Event) -> None:
        """An event from the worker: what it says about sessions goes to the backend, what it
        shows to the conversation (each kind has one handler); then the status bar."""
        handler = self.EVENTS.get(type(e))
        if handler is not None:
            await handler(self, e)
        else:
            await self.conversation.show(e)
        self.refresh_status()

    async def _session_started(self, e: ev.SessionStarted) -> None:
        self._event_session = e.session_id
        if self.runtime.session_started(e):
            self.notice(f"optimize session {e.session_id} started for {e.target}")

    async def _resumed(self, e: ev.Resumed) -> None:
        self._event_session = self.runtime.resumed(e)

    async def _harness_result(self, e: ev.HarnessResultEvent) -> None:
        self.show_result(self._event_session or self.runtime.session_id, e)

    async def _cost(self, e: ev.CostUpdate) -> None:
        self.runtime.record_cost(self._event_session or self.runtime.session_id, e)

    EVENTS: ClassVar[dict[type[ev.Event], Callable[[Any, Any], Awaitable[None]]]] = {
        ev.SessionStarted: _session_started,
        ev.Resumed: _resumed,
        ev.HarnessResultEvent: _harness_result,
        ev.CostUpdate: _cost,
    }

    def show_result(self, session_id: str, e: ev.HarnessResultEvent) -> Judged:
        """A harness result (the agent's, or /verify's and /profile's): into the ledger, and its card."""
        judged = self.runtime.record_result(session_id, e)
        self.add(HarnessCard(judged, self.runtime.ledger.best() is judged))
        self.ledger_panel.show(self.runtime.ledger)
        return judged

    # -- the worker ------------------------------------------------------------------------------
    def sink(self, e: ev.Event) -> None:
        if isinstance(e, ev.TextDelta):
            self.conversation.buffer_text(e.text)  # never waited on: the timer puts it on screen
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
        await self.conversation.end_turn()
        self.busy = None
        self._event_session = None
        self.refresh_status()
        if after is not None and result is not None:
            try:
                after(result)
            except CudaAgentError as exc:
                self.notice(exc.one_line(), "error")
        self.work_done()

    def work_done(self) -> None:
        """After the worker's result was shown (the chat sends the next queued message)."""

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
            from cuda_agent_cli.chat.approval import session_grant

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

    # -- the review ------------------------------------------------------------------------------
    def review(self, outcome: OptimizeOutcome) -> None:
        """What a run made, before anything is written: the line saying there is no correct
        kernel, or the review screen (speedup table and full diff; taken as a yes unasked when
        `ask_to_apply` is off), whose answer goes to `reviewed`."""
        if outcome.plan is None:
            self.lasting_notice(self.no_kernel(outcome), "warning")
            return
        if not self.ask_to_apply:
            self.reviewed(outcome, True)
            return
        self.review_open = True

        def decided(apply: bool | None) -> None:
            self.review_open = False
            self.conversation.following = True
            self.reviewed(outcome, bool(apply))

        from cuda_agent_cli.tui.screens import ReviewScreen

        self.push_screen(ReviewScreen(outcome, refused=self.refused), decided)

    def no_kernel(self, outcome: OptimizeOutcome) -> str:
        """The line when the run left no correct kernel to review."""
        raise NotImplementedError

    def reviewed(self, outcome: OptimizeOutcome, apply: bool) -> None:
        """The review's answer: True to write the kernel into the repository."""
        raise NotImplementedError

    # -- keys ------------------------------------------------------------------------------------
    def action_interrupt(self) -> None:
        if any(box.display for box in self.query("#completions")):
            self.hide_completions()
            return
        if self.busy:
            self.cancel.set()
            self.notice("interrupting… (the running tool finishes first)", "warning")

    def hide_completions(self) -> None:
        for box in self.query("#completions"):
            box.display = False
        self.query_one("#prompt", PromptArea).completing = False

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

    def on_descendant_focus(self, _event: Any) -> None:
        self.refresh_status()

    def action_toggle_ledger(self) -> None:
        ledger = self.ledger_panel
        ledger.display = not ledger.display
        ledger.show(self.runtime.ledger)
        self.conversation.keep_end()

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
