"""`cuda-agent optimize` on a terminal: the chat's screen focused on one task.

The session runs through the one runner (`run.optimize.run_optimize`) in the app's worker thread;
this app is only its event sink, over a `chat.optimize_task.TaskRuntime`. It shows the
conversation and the ledger while the agent works, then the same review screen as the chat. It
never writes into the repository: the answer (`decision`) goes back to the optimize command,
which applies it through the same write-back as the linear output does, so both paths land a
kernel, refuse one and exit alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static

from cuda_agent_cli.chat.optimize_task import TaskRuntime
from cuda_agent_cli.tui.agent_app import AgentApp, detect_device
from cuda_agent_cli.tui.conversation import Conversation

if TYPE_CHECKING:
    from cuda_agent_cli.run.optimize import OptimizeOutcome, OptimizeRequest

KEYS = "Esc interrupts · Ctrl+L hides the ledger · Enter on a tool call shows its output · Ctrl+C twice quits"


class OptimizeApp(AgentApp[TaskRuntime]):
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
        req: OptimizeRequest,
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
        self.outcome: OptimizeOutcome | None = None
        self.error: BaseException | None = None
        self.decision: bool | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield Conversation()
        yield Static(Text(KEYS, style="dim"), id="task-keys")
        yield Static(id="status")
        yield Static(id="too-small")

    def begin(self) -> None:
        self.start_work("optimizing", self._run, self._finished)

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

    def work_done(self) -> None:
        if self.error is not None:
            self.exit(None)  # the error line and its exit code come from the command, as in --plain

    def _finished(self, outcome: OptimizeOutcome) -> None:
        self.outcome = outcome
        self.runtime.device = outcome.device
        self.device_label = outcome.device if not self.device_label.startswith("cuda (") else self.device_label
        self.refresh_status()
        self.review(outcome)

    def no_kernel(self, outcome: OptimizeOutcome) -> str:
        why = outcome.stop_reason + (f" — {outcome.stop_detail}" if outcome.stop_detail else "")
        return f"no correct kernel in this session (stopped: {why}) — q closes"

    def reviewed(self, outcome: OptimizeOutcome, apply: bool) -> None:
        self.decision = apply and self.refused is None
        self.exit(None)

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
