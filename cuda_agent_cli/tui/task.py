"""`cuda-agent optimize` on a terminal: the chat's frame focused on one task.

The frame (tui/shell.py) with optimize's own parts: a line of keys instead of a prompt, the
ledger open, and one job, the session (`chat.optimize_task.TaskRuntime.run`, the one runner).
It shows the conversation and the ledger while the agent works, then the same review screen as
the chat. It never writes into the repository: the answer (`decision`) goes back to the optimize
command, which applies it through the same write-back as the linear output does, so both paths
land a kernel, refuse one and exit alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static

from cuda_agent_cli.chat.optimize_task import TaskRuntime
from cuda_agent_cli.tui.shell import AgentShell, detect_device

if TYPE_CHECKING:
    from cuda_agent_cli.run.optimize import OptimizeOutcome, OptimizeRequest

KEYS = "Esc interrupts · Ctrl+L hides the ledger · Enter on a tool call shows its output · Ctrl+C twice quits"


class OptimizeApp(AgentShell[TaskRuntime]):
    """The conversation and the ledger while the session runs, then the review.

    After it closes: `outcome` (None when the run did not finish), `error` (what the run raised,
    for the command to report with its exit code) and `decision` (True: apply, False: do not,
    None: not asked)."""

    NAME = "cuda-agent optimize"
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
        super().__init__(runtime, detect=detect, banner=banner, ledger_open=True)
        self.req = req
        self.ask_to_apply = ask  # False with --yes (apply without asking): no review screen
        self.refused = refused  # why y cannot apply (--no-apply), shown on the review screen
        self.outcome: OptimizeOutcome | None = None
        self.error: BaseException | None = None
        self.decision: bool | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield self.conversation
        yield Static(Text(KEYS, style="dim"), id="task-keys")
        yield self.status_bar
        yield self.too_small

    def on_agent_shell_opened(self, _message: AgentShell.Opened) -> None:
        self.start_work("optimizing", self._run, self._finished)

    def _run(self) -> Any:
        """The worker: the session, telling this app what happens."""
        try:
            return self.backend.run(self.work.tell, self.work.cancel)
        except BaseException as exc:
            self.error = exc  # the command reports it once the screen is gone
            raise

    def on_agent_shell_settled(self, _message: AgentShell.Settled) -> None:
        if self.error is not None:
            self.exit(None)  # the error line and its exit code come from the command, as in --plain

    def _finished(self, outcome: OptimizeOutcome) -> None:
        self.outcome = outcome
        if not self.status_bar.device.startswith("cuda ("):  # a detected GPU's name says more
            self.set_device(outcome.device)
        why = outcome.stop_reason + (f" — {outcome.stop_detail}" if outcome.stop_detail else "")
        no_kernel = f"no correct kernel in this session (stopped: {why}) — q closes"
        self.review(outcome, no_kernel, self._reviewed, ask=self.ask_to_apply, refused=self.refused)

    def _reviewed(self, apply: bool) -> None:
        self.decision = apply and self.refused is None
        self.exit(None)

    def action_close(self) -> None:
        if self.busy is None:
            self.exit(None)
