"""The chat's permission gate: the permission modes of `actions.Permissions`, with richer answers.

Each write into the repository and each command in `ask` mode becomes an `ApprovalRequest` (what
the call does, and for file edits the proposed old and new text), and the UI answers with one of
allow once, allow for this session, deny, or deny with an instruction the model is given. The
gate asks by posting a `PendingApproval` (the request and a future for its answer) to whoever
the running turn names (`ChatPermissions.asking`: the view, through the channel that carries the
agent's events) and waits on the future in the agent's thread; the view resolves it. The gate
also remembers the text of every file before a write it let through, so `/undo` can put it back.
No textual here.
"""

from __future__ import annotations

import threading
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from cuda_agent_cli.actions.files import apply_edit
from cuda_agent_cli.actions.paths import PathRefused, check_write, display
from cuda_agent_cli.actions.permissions import Permissions, command_program, describe_call
from cuda_agent_cli.actions.toolbox import Action, ActionContext

Choice = Literal["once", "session", "deny", "instruct"]
WAIT_S = 0.1  # how often a waiting gate looks whether the turn was interrupted


@dataclass(frozen=True)
class ApprovalRequest:
    tool: str
    summary: str  # one line: "Edit src/x.py", "Run `make`"
    path: str | None = None  # shown path of a file write
    old: str | None = None  # the file now (None: new file)
    new: str | None = None  # the file after the call (None: could not be computed)
    command: str | None = None
    problem: str | None = None  # why the new text could not be computed (the tool will say so too)


@dataclass(frozen=True)
class Decision:
    choice: Choice
    instruction: str = ""


@dataclass(eq=False)
class PendingApproval:
    """A question the gate is waiting on: the request, and the future the view resolves with
    the user's `Decision`. The gate cancels the future when the turn is interrupted, which tells
    the view to take the question down."""

    request: ApprovalRequest
    answer: futures.Future[Decision] = field(default_factory=futures.Future)

    def decide(self, decision: Decision) -> bool:
        """Answer it (from any thread); False when it was answered or withdrawn already."""
        try:
            self.answer.set_result(decision)
        except futures.InvalidStateError:
            return False
        return True


@dataclass
class FileBackup:
    """A file as it was before a write the gate let through: what `/undo` restores."""

    path: Path
    shown: str
    old: bytes | None  # None: the file did not exist


def session_grant(request: ApprovalRequest, short: bool = False) -> str:
    """What "allow for this session" lets through without asking again, in the user's words
    (`short`: for a button)."""
    if request.command is not None:
        program = command_program(request.command) or request.command
        return f"`{program}`" if short else f"every `{program}` command"
    return "all writes" if short else "every file write in the repository"


def proposed_text(action: Action, args: dict[str, Any], old: str | None) -> tuple[str | None, str | None]:
    """(the file's text after the call, problem) for Write/Edit/MultiEdit; (None, None) otherwise."""
    name = action.name
    try:
        if name == "Write":
            return str(args.get("content", "")), None
        if name == "Edit":
            new, _, _ = apply_edit(
                old or "",
                args["old_string"],
                args["new_string"],
                bool(args.get("replace_all")),
                str(args.get("file_path")),
            )
            return new, None
        if name == "MultiEdit":
            text = old or ""
            for e in args.get("edits") or []:
                text, _, _ = apply_edit(
                    text, e["old_string"], e["new_string"], bool(e.get("replace_all")), str(args.get("file_path"))
                )
            return text, None
    except (ValueError, KeyError) as exc:
        return None, str(exc)
    return None, None


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


@dataclass
class ChatPermissions(Permissions):
    """Permissions whose questions carry an edit's diff and whose answers may carry an
    instruction; asked while a turn names where questions go (`asking`)."""

    backups: list[list[FileBackup]] = field(default_factory=list)  # one entry per write let through
    lock: threading.Lock = field(default_factory=threading.Lock)
    _post: Callable[[PendingApproval], None] | None = field(default=None, init=False, repr=False)
    _cancel: threading.Event | None = field(default=None, init=False, repr=False)

    @contextmanager
    def asking(
        self, post: Callable[[PendingApproval], None] | None, cancel: threading.Event | None = None
    ) -> Iterator[None]:
        """While the block runs (one turn, in the agent's thread), each question is handed to
        `post` as a `PendingApproval` and the gate waits for its answer; `cancel`, once set,
        withdraws the question waiting (a denial). Without `post` nobody can answer: a call that
        needs a yes is refused."""
        self._post, self._cancel = post, cancel
        try:
            yield
        finally:
            self._post = self._cancel = None

    def ask(self, request: ApprovalRequest) -> Decision:
        """Post the question and wait for the answer (a denial when the turn is interrupted)."""
        assert self._post is not None
        pending = PendingApproval(request)
        self._post(pending)
        while True:
            try:
                return pending.answer.result(timeout=WAIT_S)
            except futures.TimeoutError:
                pass
            except futures.CancelledError:
                return Decision("deny")
            if self._cancel is not None and self._cancel.is_set() and pending.answer.cancel():
                return Decision("deny")

    def request_for(self, action: Action, args: dict[str, Any], ctx: ActionContext) -> ApprovalRequest:
        what = describe_call(action, args, ctx)
        if action.runs_commands:
            return ApprovalRequest(action.name, what, command=str(args.get("command", "")))
        path = args.get("file_path") or args.get("notebook_path")
        if not path:
            return ApprovalRequest(action.name, what)
        target = check_write(path, ctx.policy)
        raw = _read(target)
        old = raw.decode("utf-8", "replace") if raw is not None else None
        new, problem = proposed_text(action, args, old)
        return ApprovalRequest(action.name, what, display(target, ctx.root), old, new, problem=problem)

    def _backup(self, action: Action, args: dict[str, Any], ctx: ActionContext) -> None:
        path = args.get("file_path") or args.get("notebook_path")
        if not action.writes or not path:
            return
        try:
            target = check_write(path, ctx.policy)
        except PathRefused:
            return
        with self.lock:
            self.backups.append([FileBackup(target, display(target, ctx.root), _read(target))])

    def check(self, action: Action, args: dict[str, Any], ctx: ActionContext) -> str | None:
        refusal = self._decide(action, args, ctx)
        if refusal is None:
            self._backup(action, args, ctx)
        return refusal

    def _decide(self, action: Action, args: dict[str, Any], ctx: ActionContext) -> str | None:
        if not self.should_ask(action, args, ctx):
            return None
        if self._post is None:
            return super().check(action, args, ctx)
        request = self.request_for(action, args, ctx)
        decision = self.ask(request)
        if decision.choice == "session":
            if action.runs_commands:
                self.always_programs.add(command_program(args.get("command", "")))
            else:
                self.always_writes = True
            return None
        if decision.choice == "once":
            return None
        if decision.choice == "instruct" and decision.instruction.strip():
            return f"The user declined: {request.summary}. Their instruction instead: {decision.instruction.strip()}"
        return f"The user declined: {request.summary}. Ask them what to do instead, or try another approach."

    def pop_backup(self) -> list[FileBackup] | None:
        with self.lock:
            return self.backups.pop() if self.backups else None


def restore(backups: list[FileBackup]) -> list[str]:
    """Put files back as they were; returns one line per file saying what was done."""
    lines = []
    for b in backups:
        if b.old is None:
            if b.path.exists():
                b.path.unlink()
            lines.append(f"removed {b.shown} (it did not exist before)")
        else:
            b.path.parent.mkdir(parents=True, exist_ok=True)
            b.path.write_bytes(b.old)
            lines.append(f"restored {b.shown}")
    return lines
