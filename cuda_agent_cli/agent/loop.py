"""The ReAct loop: ask the model, run the tools it calls, feed back the results, until it is done
or a limit stops it.

Everything is injected: the model (a ModelPort), the toolbox (`schemas()` and
`call(name, args) -> ToolResult`), the session state and an event sink. Every change goes through
an event that the session's recorder (`agent.recorder`) applies to the state and writes to the
transcript before anything else happens, so a killed process can be resumed from its transcript
without losing what it did.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

from cuda_agent_cli.agent.context import (
    COMPACT_AT,
    KEEP_TURNS,
    MAX_TOOL_OUTPUT_CHARS,
    build_summary,
    compaction_span,
    context_budget,
    estimate_tokens,
    truncate_output,
)
from cuda_agent_cli.agent.events import (
    AssistantMessage,
    Compacted,
    CostUpdate,
    Event,
    EventSink,
    HarnessResultEvent,
    Resumed,
    Retrying,
    SessionStarted,
    Stopped,
    TextDelta,
    ToolFinished,
    ToolStarted,
    UserMessage,
)
from cuda_agent_cli.agent.recorder import SessionRecorder
from cuda_agent_cli.agent.session_store import CandidateRecord, SessionState, candidate_score
from cuda_agent_cli.errors import ContextOverflow, CudaAgentError, Interrupted
from cuda_agent_cli.harness_result import HarnessResult
from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.model.port import AssistantTurn, ModelPort
from cuda_agent_cli.model.textproto import tool_index, validate_arguments

HARNESS_TOOLS = ("Compile", "Verify", "Profile")
SNAPSHOT_DIR = "best"
CONTINUE_PROMPT = "Continue the task from where the session stopped: improve on the best result so far."
EMPTY_REPLY_PROMPT = (
    "Your last reply was empty. Continue the task with a tool call, or, if you are finished, "
    "say what the best result is."
)
MAX_EMPTY_REPLIES = 2
INTERRUPTED_OUTPUT = (
    "This call did not finish: the session was stopped while it ran. Run it again if you still need it."
)
CANCELLED_OUTPUT = "Interrupted by the user before this call finished."


class Toolbox(Protocol):
    def schemas(self) -> list[dict[str, Any]]: ...

    def call(self, name: str, args: dict[str, Any]) -> Any: ...  # -> actions.ToolResult


@dataclass
class Limits:
    max_turns: int | None = 200  # model calls in this run
    max_cost: float | None = None  # USD, for the whole session
    timeout: float | None = None  # wall seconds for this run
    context_tokens: int | None = None  # None: 131,072 or the model's window when smaller
    # Where each limit came from, phrased to follow its value ("from pyproject.toml", "(the
    # default)"), so the stop line tells the user which knob to turn.
    origins: dict[str, str] = field(default_factory=dict)

    def named(self, name: str, value: str) -> str:
        origin = self.origins.get(name)
        return f"{name} {value} {origin}" if origin else f"{name} {value}"


@dataclass
class AgentResult:
    session_id: str
    transcript: Path
    stop_reason: str
    detail: str
    turns: int  # model turns in the whole session
    cost_usd: float
    best: CandidateRecord | None
    final_text: str | None
    compactions: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "transcript": str(self.transcript),
            "stop_reason": self.stop_reason,
            "detail": self.detail,
            "turns": self.turns,
            "cost_usd": round(self.cost_usd, 6),
            "best": self.best.to_json() if self.best else None,
            "final_text": self.final_text,
            "compactions": self.compactions,
        }


@dataclass
class _Run:
    model: ModelPort
    toolbox: Toolbox
    state: SessionState
    limits: Limits
    sink: EventSink | None
    workspace_root: Path | None
    recorder: SessionRecorder  # the session's one writer: state, transcript, then the sink
    tools: list[dict[str, Any]] = field(default_factory=list)
    index: dict[str, dict[str, Any]] = field(default_factory=dict)
    budget: int = 0
    reported_tokens: int = 0  # what the model last counted (prompt + completion)
    reported_at: int = 0  # len(messages) when it counted
    started_at: float = field(default_factory=time.monotonic)
    run_turns: int = 0
    final_text: str | None = None
    empty_replies: int = 0
    cancel: Any = None  # a threading.Event another thread (a TUI) sets to stop the session
    seen_ids: set[str] = field(default_factory=set)
    running: dict[str, Any] | None = None  # the call whose tool is running now

    def emit(self, event: Event) -> None:
        # State first, then disk, then the UI: the transcript is safe before anyone reacts.
        self.recorder(event)

    def check_cancel(self) -> None:
        # Same path as Ctrl-C, so a stop from a UI thread keeps everything done so far.
        if self.cancel is not None and self.cancel.is_set():
            raise KeyboardInterrupt

    def on_text(self, text: str) -> None:
        self.check_cancel()  # also cuts a streaming reply short
        if self.sink is not None:
            self.sink(TextDelta(text))

    def on_retry(self, attempt: int, wait_s: float, reason: str) -> None:
        self.emit(Retrying(attempt, round(wait_s, 3), reason))

    # -- limits ----------------------------------------------------------------------------------
    def limit_reached(self) -> tuple[str, str] | None:
        lim = self.limits
        if lim.timeout is not None and time.monotonic() - self.started_at >= lim.timeout:
            return "timeout", lim.named("timeout", f"{lim.timeout:g} s")
        if lim.max_cost is not None and self.state.cost_usd >= lim.max_cost:
            return "max_cost", f"{lim.named('max_cost', f'${lim.max_cost:g}')}: spent ${self.state.cost_usd:.4f}"
        if lim.max_turns is not None and self.run_turns >= lim.max_turns:
            return "max_turns", lim.named("max_turns", str(lim.max_turns))
        return None

    # -- context ---------------------------------------------------------------------------------
    def context_tokens(self) -> int:
        msgs = self.state.messages
        if not self.reported_tokens:
            return estimate_tokens(msgs)
        # The model's own count, plus an estimate for what was added since it counted.
        return estimate_tokens(msgs, self.reported_tokens + estimate_tokens(msgs[self.reported_at :]))

    def maybe_compact(self, force: bool = False, keep_turns: int = KEEP_TURNS) -> bool:
        before = self.context_tokens()
        if not force and before < COMPACT_AT * self.budget:
            return False
        if not force and not self.reported_tokens:
            # No count from the server yet: ask the model's tokenizer before cutting history.
            before = self.model.count_tokens(self.state.messages)
            if before < COMPACT_AT * self.budget:
                return False
        span = compaction_span(self.state.messages, keep_turns)
        if span is None:
            return False
        start, end = span
        settings = self.state.meta.get("settings") or {}
        summary = build_summary(
            self.state.messages[start:end], settings.get("policy"), self.state.best, self.state.harness_results
        )
        after_msgs = self.state.messages[:start] + [{"role": "user", "content": summary}] + self.state.messages[end:]
        self.reported_tokens = 0
        self.emit(Compacted(start, end, summary, before, estimate_tokens(after_msgs)))
        return True

    # -- one turn --------------------------------------------------------------------------------
    def ask_model(self) -> AssistantTurn:
        try:
            return self.model.complete(self.state.messages, self.tools, self.on_text)
        except ContextOverflow:
            # The server counts differently from us: compact hard once, then give up honestly.
            if not self.maybe_compact(force=True, keep_turns=1):
                raise
            return self.model.complete(self.state.messages, self.tools, self.on_text)

    def record_turn(self, turn: AssistantTurn) -> list[dict[str, Any]]:
        """Record the model's turn; its calls come back with any validation error attached."""
        self.run_turns += 1
        calls = []
        for c in turn.tool_calls:
            if not c.id or c.id in self.seen_ids:
                # Some servers number calls per turn ("call_0" every time); ids must stay unique.
                c.id = f"call_{self.state.turns + 1}_{len(self.seen_ids)}"
            self.seen_ids.add(c.id)
            error = c.error or validate_arguments(c.name, c.arguments, self.index)
            calls.append({"id": c.id, "name": c.name, "arguments": c.arguments, "error": error})
        self.emit(
            AssistantMessage(
                self.state.turns + 1,
                turn.content,
                calls,
                turn.usage.prompt_tokens,
                turn.usage.completion_tokens,
                turn.cost_usd,
            )
        )
        if turn.usage.prompt_tokens:
            self.reported_tokens = turn.usage.prompt_tokens + turn.usage.completion_tokens
            self.reported_at = len(self.state.messages)
        self.emit(
            CostUpdate(
                turn.cost_usd,
                self.state.cost_usd,
                turn.usage.prompt_tokens,
                turn.usage.completion_tokens,
                self.context_tokens(),
                self.budget,
            )
        )
        return calls

    def run_calls(self, calls: Sequence[dict[str, Any]]) -> None:
        for c in calls:
            if c["error"]:
                # A malformed call is answered with the precise problem; nothing runs.
                self.emit(ToolFinished(c["id"], c["name"], f"Error: {c['error']}", True))
                continue
            self.check_cancel()
            self.run_call(c)

    def run_call(self, c: dict[str, Any]) -> None:
        self.emit(ToolStarted(c["id"], c["name"], c["arguments"]))
        self.running = c  # until its result is recorded: what a Ctrl-C meanwhile cut short
        t0 = time.monotonic()
        result = self.toolbox.call(c["name"], c["arguments"])
        # The tool output cap (docs/architecture.md, "Contracts"), tighter for small context windows (a quarter of the budget).
        output = truncate_output(str(getattr(result, "output", result)), min(MAX_TOOL_OUTPUT_CHARS, self.budget))
        is_error = bool(getattr(result, "is_error", False))
        data = getattr(result, "data", None)
        judged = getattr(result, "harness_result", None)
        if isinstance(judged, HarnessResult):
            data = judged.to_json()  # the transcript's record of a host tool's data
        self.emit(
            ToolFinished(
                c["id"],
                c["name"],
                output,
                is_error,
                data if isinstance(data, dict) else None,
                round(time.monotonic() - t0, 4),
            )
        )
        self.running = None
        if isinstance(judged, HarnessResult):
            self.record_harness_result(c["id"], c["name"], judged)

    def record_harness_result(self, call_id: str, tool: str, result: HarnessResult) -> None:
        score = candidate_score(result)
        best = score is not None and (self.state.best is None or score > self.state.best.score)
        root = self.workspace_root
        files = KernelFiles.read(root) if root is not None and root.is_dir() else None
        # The best so far is kept in the session dir, replacing the previous best.
        snapshot = str(files.snapshot(self.state.session_dir / SNAPSHOT_DIR)) if best and files is not None else None
        sources = files.digest() if files is not None else None
        self.emit(HarnessResultEvent(call_id, tool, self.state.turns, result, best, snapshot, sources))

    def answer_unfinished(self, output: str, keep: str | None = None) -> None:
        for call_id, name in self.state.unanswered_calls():
            if call_id != keep:
                self.emit(ToolFinished(call_id, name, output, True))

    def interrupted(self) -> None:
        """Ctrl-C: every call left is answered, except a harness round that was running, which
        stays open in the transcript for the resume to run again (`redo_interrupted`)."""
        running = self.running
        keep = running["id"] if running and running["name"] in HARNESS_TOOLS else None
        self.answer_unfinished(CANCELLED_OUTPUT, keep)

    def redo_interrupted(self) -> None:
        """On resume: a Compile, Verify or Profile that a stop or a kill cut short (the first call
        of the last turn left open) runs again on the same files before the model goes on, so the
        candidate it judged is judged, and timed, after all. Other open calls are answered as not
        finished."""
        open_calls = self.state.unanswered_calls()
        # Calls run in order, each answered before the next starts: the first open one is the one
        # that was running (or about to).
        if open_calls and open_calls[0][1] in HARNESS_TOOLS and open_calls[0][1] in self.index:
            call_id, name = open_calls[0]
            self.run_call({"id": call_id, "name": name, "arguments": self._arguments(call_id), "error": None})
        self.answer_unfinished(INTERRUPTED_OUTPUT)

    def _arguments(self, call_id: str) -> dict[str, Any]:
        """The arguments the model gave the call `call_id` of its last turn."""
        last = next(m for m in reversed(self.state.messages) if m.get("role") == "assistant")
        call = next(c for c in last.get("tool_calls") or () if c["id"] == call_id)
        try:
            args = json.loads(call["function"].get("arguments") or "{}")
        except ValueError:
            return {}
        return args if isinstance(args, dict) else {}

    def loop(self) -> tuple[str, str]:
        while True:
            stop = self.limit_reached()
            if stop:
                return stop
            self.maybe_compact()
            self.check_cancel()
            turn = self.ask_model()
            calls = self.record_turn(turn)
            if not calls:
                if not (turn.content or "").strip() and self.empty_replies < MAX_EMPTY_REPLIES:
                    # Small local models sometimes return nothing at all; one nudge usually helps.
                    self.empty_replies += 1
                    self.emit(UserMessage(EMPTY_REPLY_PROMPT))
                    continue
                self.final_text = turn.content
                return "done", ""
            self.empty_replies = 0
            self.run_calls(calls)


def run_agent(
    model: ModelPort,
    toolbox: Toolbox,
    *,
    state: SessionState,
    prompt: str | None = None,
    system_prompt: str = "",
    target: str = "",
    settings: dict[str, Any] | None = None,
    workspace_root: Path | None = None,
    limits: Limits | None = None,
    sink: EventSink | None = None,
    fsync: bool = True,
    cancel: Any = None,
) -> AgentResult:
    """Run (or continue) a session until the model is done or a limit stops it.

    A fresh `state` (from session.new_session) records its start with `target`, `system_prompt`,
    `settings` (policy, device, limits...) and `workspace_root`; a loaded one (from
    session.resume_session) continues where its transcript ends, and `prompt`, when given, is the
    next user message (the task for a new session, a follow-up in chat). Ctrl-C, or setting the
    `cancel` threading.Event from another thread, stops cleanly: the transcript is complete (a
    harness round that was running is left open, and the next run of the session runs it again
    first) and Interrupted (exit 130) is raised afterwards.
    """
    limits = limits or Limits()
    recorder = SessionRecorder(state, sink, fsync=fsync)
    workspace = workspace_root or state.workspace
    run = _Run(model, toolbox, state, limits, sink, Path(workspace) if workspace else None, recorder)
    run.tools = list(toolbox.schemas())
    run.index = tool_index(run.tools)
    run.cancel = cancel
    run.seen_ids = {c["id"] for m in state.messages for c in m.get("tool_calls") or ()}
    run.budget = context_budget(limits.context_tokens, getattr(model, "context_window", None))
    if hasattr(model, "on_retry"):
        model.on_retry = run.on_retry  # type: ignore[attr-defined]
    reason, detail = "error", ""
    try:
        try:
            if not state.started:
                run.emit(
                    SessionStarted(
                        state.session_id,
                        target,
                        model.name,
                        str(workspace) if workspace else None,
                        dict(settings or {}),
                        system_prompt,
                    )
                )
            else:
                run.emit(Resumed(model.name, state.turns, state.cost_usd))
                if hasattr(model, "resume_at"):
                    model.resume_at(state.turns)  # type: ignore[attr-defined]
                run.redo_interrupted()
            if prompt:
                run.emit(UserMessage(prompt))
            elif state.messages and state.messages[-1].get("role") == "assistant":
                run.emit(UserMessage(CONTINUE_PROMPT))
            reason, detail = run.loop()
        except KeyboardInterrupt:
            run.interrupted()
            run.emit(Stopped("interrupted", "stopped with Ctrl-C", state.turns, state.cost_usd))
            recorder.close()
            raise Interrupted(
                f"interrupted; session {state.session_id} is saved",
                f"continue it with --resume {state.session_id}",
            ) from None
        except CudaAgentError as exc:
            run.emit(Stopped("error", exc.one_line(), state.turns, state.cost_usd))
            raise
        except Exception as exc:
            run.emit(Stopped("error", f"{type(exc).__name__}: {exc}", state.turns, state.cost_usd))
            raise
        run.emit(Stopped(reason, detail, state.turns, state.cost_usd))
    finally:
        recorder.close()
    return AgentResult(
        state.session_id,
        state.transcript_path,
        reason,
        detail,
        state.turns,
        state.cost_usd,
        state.best,
        run.final_text,
        state.compactions,
    )
