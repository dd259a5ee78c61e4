"""What a chat session is, apart from its screen: the repository, the model, the sandboxed tools
with their permission gate, the session in the transcript store, the kernel ledger and the undo
stack. It is the chat's `ChatBackend`; the app calls the rest from its worker thread. Nothing
here imports textual or prints.

A chat session lives in the same store as optimize sessions (`sessions/<id>/transcript.jsonl`,
with `settings.command == "chat"`); `chat.json` beside it lists the ledger and the optimize
sessions started from the chat, so `--resume` brings both back.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_agent_cli.chat.approval import ChatPermissions
from cuda_agent_cli.chat.backend import Note, ViewSink
from cuda_agent_cli.chat.commands import parse_optimize_args
from cuda_agent_cli.chat.history import Opening, placed_history, read_history
from cuda_agent_cli.chat.ledger import Judged, Ledger
from cuda_agent_cli.chat.undo import UndoEntry, file_entries, revert
from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.harness_result import HarnessResult

if TYPE_CHECKING:
    import threading

    from cuda_agent_cli.actions.toolbox import ToolResult
    from cuda_agent_cli.agent.events import CostUpdate, HarnessResultEvent, Resumed, SessionStarted
    from cuda_agent_cli.agent.loop import AgentResult
    from cuda_agent_cli.agent.session_store import SessionState
    from cuda_agent_cli.harness import Harness
    from cuda_agent_cli.run.optimize import OptimizeOutcome
    from cuda_agent_cli.writeback.apply import ApplyResult, WriteBackPlan
    from cuda_agent_cli.writeback.git import RepoState, SessionDiff

CHAT_FILE = "chat.json"
CHAT_COMMAND = "chat"


@dataclass
class ChatOptions:
    path: Path | None = None  # the repository (default: the current folder, or the resumed one's)
    model: str | None = None
    api_base: str | None = None
    mode: str | None = None
    resume: str | None = None
    continue_latest: bool = False
    device: str | None = None
    policy: str | None = None
    allow_unsafe: bool = False
    data_dir: Path | None = None
    session_id: str | None = None  # a chosen id for a new session (reproducible screenshots)


def latest_chat_session(data_dir: Path | None, repo: Path | None = None) -> SessionState:
    """`chat --continue`: the newest chat session of `repo` (None: of any repository)."""
    from cuda_agent_cli.agent.session_store import resume_session

    return resume_session(None, data_dir, repo=repo, chat=True)


class ChatSession:
    """One chat over one repository. Build it before the app opens: bad input fails here."""

    def __init__(self, opts: ChatOptions) -> None:
        from cuda_agent_cli.agent.session_store import is_chat, load_session, new_session
        from cuda_agent_cli.config import load_config

        self.opts = opts
        resumed: SessionState | None = None
        saved_settings: dict[str, Any] = {}
        if opts.resume or opts.continue_latest:
            if opts.resume:
                resumed = load_session(opts.resume, opts.data_dir)
            else:  # --continue: the newest chat of the repository PATH (or the current folder) is in
                from cuda_agent_cli.task.target import repository_of

                here = repository_of(Path(opts.path or Path.cwd()))
                resumed = latest_chat_session(opts.data_dir, here)
            if not is_chat(resumed):
                raise BadInput(
                    f"session {resumed.session_id} is an optimize session, not a chat",
                    f"resume it with `cuda-agent optimize --resume {resumed.session_id}`",
                )
            saved_settings = resumed.meta.get("settings") or {}
        saved_repo = Path(saved_settings["repo"]) if saved_settings.get("repo") else None
        root = Path(opts.path or saved_repo or Path.cwd()).expanduser().resolve()
        if not root.is_dir():
            raise BadInput(f"{root} is not a folder", "cuda-agent chat [PATH] takes the repository's folder")
        if opts.path is not None and resumed is not None and saved_repo is not None and root != saved_repo.resolve():
            # As optimize's --resume (run/settings.py): what the session was started over cannot
            # change; its transcript's edits and commands were made in that repository.
            raise BadInput(
                f"{opts.path} cannot change resumed chat session {resumed.session_id}, which works in {saved_repo}",
                "drop the path to continue it there, or start a new chat in it",
            )
        self.root = root
        self.cfg = load_config(
            {
                "model": opts.model,
                "api_base": opts.api_base,
                "device": opts.device,
                "policy": opts.policy,
                "permission_mode": opts.mode,
            },
            cwd=root,
        )
        if saved_settings:
            # A flag wins, otherwise the session's own model and API base (Config.with_session, as
            # optimize's --resume). The permission mode is not carried over: each start asks
            # for it again (--mode), so a resumed chat never runs with fewer approvals unasked.
            self.cfg = self.cfg.with_session(
                {"model": saved_settings.get("model"), "api_base": saved_settings.get("api_base")}
            )
        self.model_string: str = self.cfg.model or ""
        self.api_base: str | None = self.cfg.api_base
        from cuda_agent_cli.run.checks import check_model

        check_model(self.model_string, self.api_base)  # a missing key is said before the app opens
        from cuda_agent_cli.actions import ActionContext, make_toolbox
        from cuda_agent_cli.model.factory import make_model
        from cuda_agent_cli.sandbox import SandboxPolicy, open_sandbox

        self.sandbox = open_sandbox(SandboxPolicy.repository(root), opts.allow_unsafe)
        self.permissions = ChatPermissions(mode=self.cfg.permission_mode)
        self.toolbox = make_toolbox(ActionContext(self.sandbox, harness=None, permissions=self.permissions))
        self.model = make_model(self.model_string, self.api_base)
        self.state: SessionState = resumed or new_session(opts.data_dir, opts.session_id)
        self.ledger = Ledger()
        self.optimize_sessions: list[str] = []
        self.optimize_started: dict[str, dict[str, Any]] = {}  # id -> where in the chat it started, target
        # Lines the chat showed outside the transcript (the /optimize line, applied, reverted ...),
        # each with where it goes: {"at", "after", "seq", "text", "kind"}.
        self.notes: list[dict[str, Any]] = []
        self._seq = 0
        self.undo_stack: list[UndoEntry] = []
        self.device: str | None = opts.device
        self.context_tokens = 0
        self.context_budget = self.cfg.context_tokens
        self.tokens = 0  # prompt and completion tokens of the chat and the sessions it started
        self.session_costs: dict[str, float] = {}  # each session's cost so far, this chat's too
        self.repo_start: RepoState | None = None  # when the chat started: what /diff compares with
        self._load_chat_file()
        if self.repo_start is None:
            from cuda_agent_cli.writeback.git import repo_state

            self.repo_start = repo_state(root)

    # -- what the screen shows (ChatBackend) -----------------------------------------------------
    @property
    def session_id(self) -> str:
        return self.state.session_id

    @property
    def mode(self) -> str:
        return self.permissions.mode

    @property
    def cost_usd(self) -> float:
        """This chat's cost and that of every optimize session it started."""
        others = sum(v for k, v in self.session_costs.items() if k != self.session_id)
        return self.state.cost_usd + others

    def opening(self) -> Opening:
        """A resumed chat's conversation, with its /optimize sessions, cards and recorded lines in
        their places (the status bar's tokens and context taken from it on the way); a new chat's
        welcome line."""
        path = self.state.transcript_path
        if not path.is_file():
            return Opening(
                None,
                "cuda-agent chat",
                f" over {self.root.name}/ · session {self.session_id} · "
                "/help for commands, Esc interrupts, Ctrl+C twice quits",
            )
        placed = placed_history(self.ledger, self.optimize_started, self.notes, self.optimize_transcript)
        found = read_history(path, placed)
        self.tokens += found.tokens
        if found.context_tokens is not None:
            self.context_tokens = found.context_tokens
        self.context_budget = found.context_budget or self.context_budget
        if not self.context_tokens:
            from cuda_agent_cli.agent.context import estimate_tokens

            self.context_tokens = estimate_tokens(self.state.messages)
        return Opening(
            found.items,
            "",
            f"resumed session {self.session_id}: {self.state.turns} turns, {self.ledger.counted()} in the ledger",
        )

    def session_started(self, event: SessionStarted) -> bool:
        """An optimize session started from this chat (/optimize) is recorded where it started."""
        if event.session_id == self.session_id:
            return False
        self.record_optimize_session(event.session_id, event.target)
        return True

    def resumed(self, event: Resumed) -> str | None:
        return self.session_id  # the chat's own turns go on

    def record_cost(self, session_id: str, event: CostUpdate) -> None:
        self.tokens += event.prompt_tokens + event.completion_tokens
        if session_id == self.session_id:  # an optimize session's context is its own
            self.context_tokens, self.context_budget = event.context_tokens, event.context_budget
        self.session_costs[session_id] = event.total_cost_usd

    # -- the chat file ---------------------------------------------------------------------------
    @property
    def chat_file(self) -> Path:
        return Path(self.state.session_dir) / CHAT_FILE

    def _load_chat_file(self) -> None:
        try:
            data = json.loads(self.chat_file.read_text())
        except (OSError, ValueError):
            return
        from cuda_agent_cli.writeback.git import RepoState

        self.repo_start = RepoState.from_json(data.get("repo_start"))
        self.optimize_sessions = [str(s) for s in data.get("optimize_sessions") or []]
        started = data.get("optimize_started")
        self.optimize_started = (
            {str(k): v for k, v in started.items() if isinstance(v, dict)} if isinstance(started, dict) else {}
        )
        self.undo_stack = [e for e in map(UndoEntry.from_json, data.get("undo") or []) if e is not None]
        self.notes = [n for n in data.get("notes") or [] if isinstance(n, dict) and isinstance(n.get("text"), str)]
        seqs = [x.get("seq") for x in [*self.notes, *self.optimize_started.values()]]
        self._seq = max([q for q in seqs if isinstance(q, int)], default=0)
        for row in data.get("ledger") or []:
            if isinstance(row, dict) and isinstance(row.get("result"), dict):
                at = row.get("at")
                sources = row.get("sources")
                judged = self.ledger.add(
                    str(row.get("session_id", "")),
                    str(row.get("tool", "")),
                    int(row.get("turn") or 0),
                    HarnessResult.from_json(row["result"]),
                    at if isinstance(at, int) else None,
                    sources if isinstance(sources, str) else None,
                )
                judged.reverted = row.get("reverted") is True

    def _save_chat_file(self) -> None:
        data = {
            "repo_start": self.repo_start.to_json() if self.repo_start is not None else None,
            "optimize_sessions": self.optimize_sessions,
            "optimize_started": self.optimize_started,
            "ledger": [
                {
                    "session_id": c.session_id,
                    "tool": c.tool,
                    "turn": c.turn,
                    "result": c.result.to_json(),
                    "at": c.at,
                    "reverted": c.reverted,
                    "sources": c.sources,
                }
                for c in self.ledger.judged
            ],
            "undo": [e.to_json() for e in self.undo_stack],
            "notes": self.notes,
        }
        tmp = self.chat_file.with_suffix(".tmp")
        self.state.session_dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.chat_file)

    def record_result(self, session_id: str, event: HarnessResultEvent) -> Judged:
        """A harness result of `session_id` in the ledger, kept in chat.json with where in the
        chat's transcript it came."""
        self.ensure_started()
        judged = self.ledger.add(session_id, event.tool, event.turn, event.result, self.events_written(), event.sources)
        self._save_chat_file()
        return judged

    def events_written(self) -> int:
        """Events in the chat's transcript so far: a resumed chat puts cards and notices back there."""
        from cuda_agent_cli.agent.transcript import read_events

        path = self.state.transcript_path
        return sum(1 for _ in read_events(path)) if path.is_file() else 0

    def ensure_started(self) -> None:
        """Record the chat's start now (not only at its first message), so a chat that only ran
        /optimize can be resumed too."""
        if self.state.started:
            return
        from cuda_agent_cli.agent.events import SessionStarted
        from cuda_agent_cli.agent.recorder import record

        record(
            self.state,
            SessionStarted(
                self.session_id,
                f"chat {self.root}",
                self.model_string,
                str(self.root),
                self.settings(),
                self.system_prompt(),
            ),
        )
        self._save_chat_file()

    def system_prompt(self) -> str:
        from cuda_agent_cli.agent.prompts import chat_system_prompt

        return chat_system_prompt(repo=str(self.root), mode=self.permissions.mode, device=self.device)

    def record_optimize_session(self, session_id: str, target: str = "") -> None:
        self.ensure_started()
        if session_id not in self.optimize_sessions:
            self.optimize_sessions.append(session_id)
            self.optimize_started[session_id] = {
                "at": self.events_written(),
                "target": target,
                "after": len(self.ledger.judged),
                "seq": self._next_seq(),
            }
            self._save_chat_file()

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def record_note(self, text: str, kind: str = "info") -> None:
        """A line the chat shows that its transcript does not hold (the /optimize line, what the
        review applied, what /undo reverted): kept so a resumed chat shows it where it was."""
        self.ensure_started()
        self.notes.append(
            {
                "at": self.events_written(),
                "after": len(self.ledger.judged),
                "seq": self._next_seq(),
                "text": text,
                "kind": kind,
            }
        )
        self._save_chat_file()

    def optimize_transcript(self, session_id: str) -> Path:
        """The transcript of an optimize session started from this chat."""
        from cuda_agent_cli.agent.session_store import sessions_root

        return sessions_root(self.opts.data_dir) / session_id / "transcript.jsonl"

    # -- turns -----------------------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        return {
            "command": CHAT_COMMAND,
            "repo": str(self.root),
            "model": self.model_string,
            "api_base": self.api_base,
            "mode": self.permissions.mode,
        }

    def send(self, text: str, sink: ViewSink | None, cancel: threading.Event | None) -> AgentResult:
        """One user message and the agent's work on it; Interrupted when `cancel` is set. `sink`
        is told the agent's events, a line for each @mention that cannot be attached, and each
        approval the permission gate waits on. The writes it let through go onto the undo stack,
        however it ended."""
        try:
            with self.permissions.asking(sink, cancel):
                return self._turn(text, sink, cancel)
        finally:
            self.take_file_backups()

    def _turn(self, text: str, sink: ViewSink | None, cancel: threading.Event | None) -> AgentResult:
        from cuda_agent_cli.agent.loop import Limits, run_agent
        from cuda_agent_cli.chat.mentions import expand

        # The one place mentions are read: what the model is sent, and what could not be attached.
        prompt, problems = expand(text, self.root)
        if sink is not None:
            for problem in problems:
                sink(Note(problem, "warning"))
        if not self.chat_file.is_file():
            self._save_chat_file()  # where the repository stood at the start, for /diff after a resume
        limits = Limits(
            max_turns=self.cfg.max_turns,
            max_cost=self.cfg.max_cost,
            timeout=None,
            context_tokens=self.cfg.context_tokens,
        )
        return run_agent(
            self.model,
            self.toolbox,
            state=self.state,
            prompt=prompt,
            system_prompt=self.system_prompt(),
            target=f"chat {self.root}",
            settings=self.settings(),
            workspace_root=self.root,
            limits=limits,
            sink=sink,
            cancel=cancel,
        )

    def set_model(self, name: str) -> None:
        from cuda_agent_cli.model.factory import make_model
        from cuda_agent_cli.run.checks import check_model

        check_model(name, self.api_base)
        self.model = make_model(name, self.api_base)
        if hasattr(self.model, "resume_at"):
            self.model.resume_at(0)
        self.model_string = name

    def set_mode(self, mode: str) -> None:
        from cuda_agent_cli.actions.permissions import MODES

        if mode not in MODES:
            raise BadInput(f"unknown permission mode {mode!r}", f"use one of {', '.join(MODES)}")
        self.permissions.mode = mode
        # Choosing a mode starts it afresh: what "allow for this session" granted is forgotten.
        self.permissions.always_writes = False
        self.permissions.always_programs.clear()

    def compact(self) -> str:
        """Summarize older turns now (what the loop does on its own near the budget)."""
        from cuda_agent_cli.agent.context import build_summary, compaction_span, estimate_tokens
        from cuda_agent_cli.agent.events import Compacted
        from cuda_agent_cli.agent.recorder import record

        msgs = self.state.messages
        span = compaction_span(msgs, keep_turns=2)
        if span is None:
            return "nothing to compact yet"
        start, end = span
        summary = build_summary(msgs[start:end], None, self.state.best, self.state.harness_results)
        before = estimate_tokens(msgs)
        after = estimate_tokens(msgs[:start] + [{"role": "user", "content": summary}] + msgs[end:])
        record(self.state, Compacted(start, end, summary, before, after))
        self.context_tokens = after
        return f"compacted {end - start} messages: about {before} -> {after} tokens"

    def run_shell(self, command: str) -> ToolResult:
        """`!cmd`: the command in the same sandbox as the agent's (the user typed it: no approval),
        recorded in the transcript with its output (for /export and a resumed chat; the model
        is not sent it)."""
        import time

        bash = self.toolbox.actions["Bash"]
        t0 = time.monotonic()
        result = bash.run({"command": command}, self.toolbox.ctx)
        self.record_shell(command, result.output, result.is_error, time.monotonic() - t0)
        return result

    def record_shell(self, command: str, output: str, is_error: bool, duration_s: float) -> None:
        from cuda_agent_cli.agent.events import ShellCommand
        from cuda_agent_cli.agent.recorder import record

        self.ensure_started()
        record(self.state, ShellCommand(command, output, is_error, round(duration_s, 3)))

    # -- optimize inside the chat ----------------------------------------------------------------
    def optimize(self, args: list[str], sink: ViewSink | None, cancel: threading.Event | None) -> OptimizeOutcome:
        """/optimize: one session through the runner; `sink` is told its events and each stage
        (a `Note`)."""
        from cuda_agent_cli.run.optimize import OptimizeRequest, run_optimize

        fields = parse_optimize_args(args)
        req = OptimizeRequest(
            target=fields["target"],
            cwd=self.root,
            model=self.model_string,
            api_base=self.api_base,
            device=fields["device"] or self.opts.device,
            policy=fields["policy"] or self.opts.policy,
            inputs=fields["inputs"],
            capture=fields["capture"],
            allow_unsafe=self.opts.allow_unsafe,
        )
        on_stage = (lambda line: sink(Note(line))) if sink is not None else None
        outcome = run_optimize(req, sink=sink, on_stage=on_stage, data_dir=self.opts.data_dir, cancel=cancel)
        self.device = outcome.device
        return outcome

    def decide(self, outcome: OptimizeOutcome, apply: bool) -> list[Note]:
        """The review's answer on an /optimize run's kernel: written back on yes when it was a
        measured improvement (the same rule as `cuda-agent optimize`); the lines that say what
        happened, kept for a resumed chat."""
        notes: list[Note] = []
        if apply and outcome.status != "improved":
            from cuda_agent_cli.run.optimize import not_applied

            notes.append(Note(f"not applied: {not_applied(outcome)}", "warning"))
        elif apply and outcome.plan is not None:  # the review is shown only for a plan
            from cuda_agent_cli.errors import CudaAgentError

            try:
                result = self.apply(outcome.plan, outcome.session_id)
            except CudaAgentError as exc:
                notes.append(Note(f"not applied: {exc.one_line()}", "error"))
            else:
                if result.commit:
                    notes.append(
                        Note(
                            f"applied: committed {result.commit[:10]} on new branch {result.branch} "
                            f"({len(result.written)} files; /undo reverts it)",
                            "success",
                        )
                    )
                else:
                    notes.append(Note(f"applied: wrote {len(result.written)} files (not committed)", "success"))
                notes += [Note(n, "warning") for n in result.notes]
        else:
            notes.append(Note("discarded: nothing was written into the repository"))
        for note in notes:
            self.record_note(note.text, note.kind)
        return notes

    def apply(self, plan: WriteBackPlan, session_id: str | None = None) -> ApplyResult:
        """Write the reviewed kernel into the repository (branch, commit, manifest), as optimize does."""
        from cuda_agent_cli.writeback.apply import apply_plan

        result = apply_plan(plan, commit=plan.in_git, allow_dirty=False)
        self.undo_stack.append(
            UndoEntry(
                "apply",
                f"the kernel for {plan.module_rel}",
                commit=result.commit,
                branch=result.branch,
                written=list(result.written),
                changes=[] if result.commit else [(c.path, c.old, c.new) for c in plan.changes],
                repo_root=str(plan.repo_root),
                session_id=session_id,
            )
        )
        self._save_chat_file()
        return result

    def harness_for_last(self) -> tuple[Harness, str]:
        """A harness over the workspace of the latest /optimize session, and that session's id."""
        from cuda_agent_cli.agent.session_store import sessions_root
        from cuda_agent_cli.harness import Harness
        from cuda_agent_cli.run.settings import load_task
        from cuda_agent_cli.workspace import open_workspace

        if not self.optimize_sessions:
            raise BadInput("no kernel to check yet", "run /optimize FILE::Class first")
        sid = self.optimize_sessions[-1]
        session_dir = sessions_root(self.opts.data_dir) / sid
        task = load_task(session_dir)
        harness = Harness(
            open_workspace(session_dir),
            device=task.device,
            policy=task.policy,
            atol=self.cfg.atol,
            rtol=self.cfg.rtol,
            precision=self.cfg.precision,
            reward_baseline=self.cfg.reward_baseline,
        )
        return harness, sid

    def judge(self, harness: Harness, tool: str) -> HarnessResultEvent:
        """/verify or /profile of the latest candidate: its harness result, as the agent's own
        rounds report theirs (which sources it judged included)."""
        from cuda_agent_cli.agent.events import HarnessResultEvent
        from cuda_agent_cli.workspace import candidate_digest

        result = harness.verify() if tool == "Verify" else harness.profile()
        return HarnessResultEvent(
            "", tool, 0, result.as_recorded(), False, sources=candidate_digest(harness.workspace.root)
        )

    def session_diff(self) -> SessionDiff | None:
        """What this chat changed in the repository since it started (writeback.git.SessionDiff),
        or None outside git."""
        from cuda_agent_cli.writeback.git import session_diff

        return session_diff(self.root, self.repo_start)

    # -- undo ------------------------------------------------------------------------------------
    def take_file_backups(self) -> None:
        """Move the gate's backups of approved writes onto the undo stack (after each turn)."""
        taken = []
        while (b := self.permissions.pop_backup()) is not None:
            taken.append(b)
        entries = file_entries(taken[::-1])  # pop_backup gives newest first; the stack wants oldest first
        if entries:
            self.undo_stack += entries
            self._save_chat_file()

    def undo(self) -> str:
        """Revert the newest change this session made; says what was reverted."""
        if not self.undo_stack:
            return "nothing to undo: this session has not changed the repository"
        entry = self.undo_stack[-1]
        message = revert(entry, self.root)
        if entry.kind == "apply" and entry.session_id and self.ledger.mark_reverted(entry.session_id):
            message += f"; the candidates of session {entry.session_id} no longer count as the best"
        self.undo_stack.pop()
        self._save_chat_file()
        return message

    def close(self) -> None:
        self.toolbox.close()
