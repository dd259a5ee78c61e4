"""`cuda-agent optimize` on a terminal: the chat's screen focused on one task.

The session runs through the one runner (`run.optimize.run_optimize`) in the app's worker thread;
this app is only its event sink and its approver. It shows the conversation and the ledger while
the agent works, then the same review screen as the chat. It never writes into the repository:
the answer (`decision`) goes back to the optimize command, which applies it through the same
write-back as the linear output does, so both paths land a kernel, refuse one and exit alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from cuda_agent_cli.agent import events as ev
from cuda_agent_cli.tui.app import FLUSH_HZ, ChatApp, detect_device
from cuda_agent_cli.tui.ledger import Ledger

KEYS = "Esc interrupts · Ctrl+L hides the ledger · Enter on a tool call shows its output · Ctrl+C twice quits"
WHERE = "the agent works in its own workspace; nothing is written into the repository before the review"


@dataclass
class _Mode:
    mode: str = "optimize"  # the status bar's mode: the agent works in its workspace, never the repo


@dataclass
class _Cost:
    cost_usd: float = 0.0  # the chat's own cost; an optimize session's is counted per session


class TaskRuntime:
    """What the chat's screen reads from its runtime, for one optimize session: no chat of its
    own, no repository access, only the ledger of the candidates the harness judged."""

    def __init__(self, req: Any, model: str, device: str | None) -> None:
        self.req = req
        self.root = req.cwd
        self.model_string = model
        self.device = device
        self.session_id = ""  # the optimize session's id is known once it starts
        self.optimize_session: str | None = None
        self.state = _Cost()
        self.permissions = _Mode()
        self.ledger = Ledger()
        self.context_tokens = 0
        self.context_budget = 0

    def record_result(
        self, session_id: str, tool: str, turn: int, result: dict[str, Any], sources: str | None = None
    ) -> Any:
        return self.ledger.add(session_id, tool, turn, result, sources=sources)  # the session's transcript keeps it

    def record_optimize_session(self, session_id: str, target: str = "") -> None:
        self.optimize_session = session_id


class OptimizeApp(ChatApp):
    """The conversation and the ledger while the session runs, then the review.

    After it closes: `outcome` (None when the run did not finish), `error` (what the run raised,
    for the command to report with its exit code) and `decision` (True: apply, False: do not,
    None: not asked)."""

    NAME = "cuda-agent optimize"
    LAYOUT = ("#main", "#task-keys", "#status")
    LEDGER_OPEN = True
    BINDINGS = [Binding("q", "close", "Close", show=False)]

    def __init__(
        self,
        req: Any,
        runtime: TaskRuntime,
        *,
        ask: bool,
        refused: str | None = None,
        detect: Callable[[], str] = detect_device,
        banner: str | None = None,
    ) -> None:
        super().__init__(runtime, detect=detect, banner=banner)
        self.req = req
        self.ask_to_apply = ask  # False with --yes (apply without asking): no review screen
        self.refused = refused  # why y cannot apply (--no-apply), shown on the review screen
        self.outcome: Any = None
        self.error: BaseException | None = None
        self.decision: bool | None = None
        self.resumed: str | None = None  # the id of the session whose earlier turns are shown

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield VerticalScroll(id="conversation")
        yield Static(Text(KEYS, style="dim"), id="task-keys")
        yield Static(id="status")
        yield Static(id="too-small")

    def start(self) -> None:
        self.query_one("#too-small").display = False
        if not (self.req.resuming and self._load_resumed()):
            target = self.req.target or f"session {self.req.resume or '(the latest)'}"
            self.notice(Text.assemble(("cuda-agent optimize", "bold"), f" {target} · {WHERE}"))
        self.refresh_status()
        self.set_interval(1 / FLUSH_HZ, self._flush_text)
        self._check_size()
        if self.runtime.device is None:
            import threading

            threading.Thread(target=self._detect_device, daemon=True).start()
        self.start_work("optimizing", self._run, self._finished)

    def _load_resumed(self) -> bool:
        """The earlier conversation and ledger of the session `--resume`/`--continue` picks, as
        `chat --resume` shows a chat's; False when there is none (the run says why)."""
        from cuda_agent_cli.errors import CudaAgentError
        from cuda_agent_cli.run.optimize import resumed_session

        try:
            state = resumed_session(self.req)
        except CudaAgentError:
            return False
        self.resumed = state.session_id
        items = self.history_items(state.transcript_path)
        target = state.meta.get("target") or "?"
        self.show_history(
            items,
            Text.assemble(
                ("cuda-agent optimize", "bold"),
                f" resumed session {state.session_id} for {target}: {state.turns} turns, "
                f"{self.runtime.ledger.counted()} in the ledger · {WHERE}",
            ),
        )
        return True

    def history_event(self, e: Any) -> Any:
        """An optimize transcript holds its harness results: each is a card where it happened
        and a candidate in the ledger; its cost so far goes to the status bar."""
        from cuda_agent_cli.tui.app import HistoryItem

        sid = self.resumed or ""
        if isinstance(e, ev.HarnessResultEvent):
            judged = self.runtime.ledger.add(sid, e.tool, e.turn, e.result, sources=e.sources)
            return HistoryItem.card(judged, self.runtime.ledger.was_best(judged))
        if isinstance(e, ev.CostUpdate):
            self._session_costs[sid] = e.total_cost_usd
        return None

    def _run(self) -> Any:
        """The worker: the one session runner, with this app as its sink."""
        from cuda_agent_cli.run.optimize import run_optimize

        try:
            return run_optimize(
                self.req, sink=self.sink, on_stage=lambda msg: self._post(self.notice, msg), cancel=self.cancel
            )
        except BaseException as exc:
            self.error = exc  # the command reports it once the screen is gone
            raise

    async def handle_event(self, e: Any) -> None:
        if isinstance(e, ev.SessionStarted):
            self.runtime.model_string = e.model or self.runtime.model_string
        elif isinstance(e, ev.Resumed):
            # A resumed session starts no new one: what follows belongs to the session shown.
            self.runtime.model_string = e.model or self.runtime.model_string
            self._event_session = self.resumed
        await super().handle_event(e)
        if isinstance(e, ev.CostUpdate):
            # The chat counts context for its own session only; here the optimize session is the one.
            self.runtime.context_tokens, self.runtime.context_budget = e.context_tokens, e.context_budget
            self.refresh_status()

    async def _work_done(self, result: Any, after: Callable[[Any], None] | None) -> None:
        await super()._work_done(result, after)
        if self.error is not None:
            self.exit(None)  # the error line and its exit code come from the command, as in --plain

    def _finished(self, outcome: Any) -> None:
        self.outcome = outcome
        self.runtime.device = outcome.device
        self.device_label = outcome.device if not self.device_label.startswith("cuda (") else self.device_label
        self.refresh_status()
        if outcome.plan is None:
            why = outcome.stop_reason + (f" — {outcome.stop_detail}" if outcome.stop_detail else "")
            self.notice(f"no correct kernel in this session (stopped: {why}) — q closes", "warning")
            return
        if not self.ask_to_apply:
            self.decision = True
            self.exit(None)
            return
        self.review_open = True

        def decided(apply: bool | None) -> None:
            self.review_open = False
            self.decision = bool(apply) and self.refused is None
            self.exit(None)

        from cuda_agent_cli.tui.screens import ReviewScreen

        self.push_screen(ReviewScreen(outcome, refused=self.refused), decided)

    def action_close(self) -> None:
        if self.busy is None:
            self.exit(None)

    def action_toggle_ledger(self) -> None:
        ledger = self.ledger_panel
        ledger.display = not ledger.display
        ledger.show(self.runtime.ledger)

    def quit_saving(self) -> None:
        # The worker sees the cancel, records the stop and raises Interrupted: exit 130.
        self.cancel.set()
        self.exit(None)


def task_runtime(req: Any) -> TaskRuntime:
    """The status bar's model and device before the session says them (it may still change them)."""
    from cuda_agent_cli.run.optimize import resolve_config

    cfg = resolve_config(req)  # the run's own, when the front door resolved it already
    return TaskRuntime(req, cfg.model or "", req.device or cfg.device)
