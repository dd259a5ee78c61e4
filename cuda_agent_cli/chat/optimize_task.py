"""One optimize session on a terminal, as the chat's screen shows it (`cuda-agent optimize`): a
`ChatBackend` with no chat of its own and no repository access, only the session's conversation
and the ledger of the candidates the harness judged. Its transcript is its whole record.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent_cli.chat.backend import Note
from cuda_agent_cli.chat.history import Opening, read_history
from cuda_agent_cli.chat.ledger import Judged, Ledger

if TYPE_CHECKING:
    import threading

    from cuda_agent_cli.agent.events import CostUpdate, HarnessResultEvent, Resumed, SessionStarted
    from cuda_agent_cli.chat.backend import ViewSink
    from cuda_agent_cli.run.optimize import OptimizeOutcome, OptimizeRequest

WHERE = "the agent works in its own workspace; nothing is written into the repository before the review"


class TaskRuntime:
    """The backend of `tui.task.OptimizeApp` for one `OptimizeRequest`."""

    mode = "optimize"  # the status bar's mode: the agent works in its workspace, never the repo

    def __init__(self, req: OptimizeRequest, model: str, device: str | None) -> None:
        self.req = req
        self.root: Path = req.cwd
        self.model_string = model
        self.device = device
        self.session_id = ""  # no chat: the optimize session is another one, known once it starts
        self.optimize_session: str | None = None
        self.resumed_id: str | None = None  # the session `--resume`/`--continue` shows, once shown
        self.ledger = Ledger()
        self.context_tokens = 0
        self.context_budget = 0
        self.tokens = 0
        self.session_costs: dict[str, float] = {}

    @property
    def cost_usd(self) -> float:
        return sum(v for k, v in self.session_costs.items() if k != self.session_id)

    def opening(self) -> Opening:
        """With --resume/--continue, that session's turns, cards and ledger from its transcript
        (`run.optimize.resumed_session` picks it, as the runner does); else the task's line (also
        when there is none to resume: the run says why)."""
        if self.req.resuming:
            from cuda_agent_cli.errors import CudaAgentError
            from cuda_agent_cli.run.optimize import resumed_session

            try:
                state = resumed_session(self.req)
            except CudaAgentError:
                state = None
            if state is not None:
                sid = state.session_id
                self.resumed_id = sid
                found = read_history(state.transcript_path, ledger=self.ledger, session_id=sid)
                self.tokens += found.tokens
                if found.context_tokens is not None:
                    self.context_tokens = found.context_tokens
                self.context_budget = found.context_budget or self.context_budget
                if found.cost_usd is not None:
                    self.session_costs[sid] = found.cost_usd
                target = state.meta.get("target") or "?"
                return Opening(
                    found.items,
                    "cuda-agent optimize",
                    f" resumed session {sid} for {target}: {state.turns} turns, "
                    f"{self.ledger.counted()} in the ledger · {WHERE}",
                )
        target = self.req.target or f"session {self.req.resume or '(the latest)'}"
        return Opening(None, "cuda-agent optimize", f" {target} · {WHERE}")

    def run(self, sink: ViewSink, cancel: threading.Event) -> OptimizeOutcome:
        """The session, through the one runner (`run.optimize.run_optimize`): `sink` is told its
        events and each stage (a `Note`); `cancel` stops it as Ctrl+C does."""
        from cuda_agent_cli.run.optimize import run_optimize

        outcome = run_optimize(self.req, sink=sink, on_stage=lambda line: sink(Note(line)), cancel=cancel)
        self.device = outcome.device
        return outcome

    def session_started(self, event: SessionStarted) -> bool:
        self.model_string = event.model or self.model_string
        self.optimize_session = event.session_id
        return event.session_id != self.session_id

    def resumed(self, event: Resumed) -> str | None:
        # A resumed session starts no new one: what follows belongs to the session shown.
        self.model_string = event.model or self.model_string
        return self.resumed_id

    def record_result(self, session_id: str, event: HarnessResultEvent) -> Judged:
        # The session's transcript keeps it.
        return self.ledger.add(session_id, event.tool, event.turn, event.result, sources=event.sources)

    def record_cost(self, session_id: str, event: CostUpdate) -> None:
        self.tokens += event.prompt_tokens + event.completion_tokens
        self.session_costs[session_id] = event.total_cost_usd
        # Whichever session it was, the optimize session's context is the one to show.
        self.context_tokens, self.context_budget = event.context_tokens, event.context_budget

    def record_note(self, text: str, kind: str = "info") -> None:
        """Nothing to keep: the session's transcript is its record, and what the screen adds
        (its review, its stop) is the command's to say."""


def task_runtime(req: OptimizeRequest) -> TaskRuntime:
    """The status bar's model and device before the session says them (it may still change them)."""
    from cuda_agent_cli.run.optimize import resolve_config

    cfg = resolve_config(req)  # the run's own, when the front door resolved it already
    return TaskRuntime(req, cfg.model or "", req.device or cfg.device)
