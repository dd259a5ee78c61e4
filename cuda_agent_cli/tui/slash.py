"""The chat's slash commands on screen: `SlashCommands` holds a handler for each row of
`chat.commands.COMMANDS` (the table the chat package declares: name, usage, description, whether
it runs while the agent works), checked against it when the app is made; `run` parses a typed
line, holds back a command that waits while the agent works, and calls its handler, which asks
the chat session and shows what came back through the app's parts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from rich.text import Text
from textual.widgets import Static

from cuda_agent_cli.chat import commands
from cuda_agent_cli.chat.session import ChatOptions, ChatSession
from cuda_agent_cli.errors import BadInput, CudaAgentError
from cuda_agent_cli.tui import render
from cuda_agent_cli.tui.widgets import UserTurn

if TYPE_CHECKING:
    from cuda_agent_cli.agent.events import HarnessResultEvent
    from cuda_agent_cli.run.optimize import OptimizeOutcome
    from cuda_agent_cli.tui.shell import AgentShell

Handler = Callable[[list[str], str], None]  # (the arguments, the line after the name as typed)


class SlashCommands:
    """The chat app's commands: one handler (args, raw_args) per row of the table. They act
    through the frame's parts (`app`: notices, work, the ledger), the chat session the app shows
    now (`session()`), and two steps that are the chat app's own, handed in by it: showing another
    session, and reviewing an /optimize run."""

    def __init__(
        self,
        app: AgentShell[ChatSession],
        session: Callable[[], ChatSession],
        switch_session: Callable[[ChatSession], None],
        review_optimize: Callable[[OptimizeOutcome], None],
    ) -> None:
        self.app = app
        self.session = session
        self.switch_session = switch_session
        self.review_optimize = review_optimize
        self.handlers: dict[str, Handler] = {
            "help": self.cmd_help,
            "quit": self.cmd_quit,
            "cost": self.cmd_cost,
            "context": self.cmd_context,
            "model": self.cmd_model,
            "mode": self.cmd_mode,
            "clear": self.cmd_clear,
            "diff": self.cmd_diff,
            "verify": self.cmd_verify,
            "profile": self.cmd_profile,
            "sessions": self.cmd_sessions,
            "resume": self.cmd_resume,
            "export": self.cmd_export,
            "compact": self.cmd_compact,
            "undo": self.cmd_undo,
            "optimize": self.cmd_optimize,
            "ledger": self.cmd_ledger,
        }
        # The table and the handlers are kept together: a row without one fails the app's start.
        names = [c.name for c in commands.COMMANDS]
        unhandled = [n for n in names if n not in self.handlers]
        unknown = [n for n in self.handlers if n not in names]
        if unhandled or unknown:
            raise TypeError(f"slash commands without a handler: {unhandled}; handlers without a command: {unknown}")

    def run(self, line: str) -> None:
        try:
            parsed = commands.parse(line)
        except commands.UnknownCommand as exc:
            self.app.notice(str(exc), "error")
            return
        cmd = parsed.command
        if self.app.busy and not cmd.while_busy:
            self.app.notice(
                f"/{cmd.name} cannot run while the agent works — wait, or press Esc to interrupt", "warning"
            )
            return
        try:
            self.handlers[cmd.name](parsed.args, parsed.raw_args)
        except CudaAgentError as exc:
            self.app.notice(exc.one_line(), "error")

    def cmd_help(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.tui.screens import HelpScreen

        self.app.push_screen(HelpScreen())

    def cmd_quit(self, args: list[str], raw: str) -> None:
        self.app.quit_saving()

    def cmd_cost(self, args: list[str], raw: str) -> None:
        rt = self.session()
        lines = [f"this chat: ${rt.state.cost_usd:.4f} over {rt.state.turns} turns, {rt.tokens:,} tokens in all"]
        for sid, cost in rt.session_costs.items():
            if sid != rt.session_id:
                lines.append(f"optimize session {sid}: ${cost:.4f}")
        self.app.notice("\n".join(lines))

    def cmd_context(self, args: list[str], raw: str) -> None:
        rt = self.session()
        pct = 100.0 * rt.context_tokens / (rt.context_budget or 1)
        self.app.notice(
            f"context: about {rt.context_tokens:,} of {rt.context_budget:,} tokens ({pct:.0f}%); "
            f"{len(rt.state.messages)} messages, {rt.state.compactions} compactions. /compact frees room."
        )

    def cmd_model(self, args: list[str], raw: str) -> None:
        if not args:
            self.app.notice(f"model: {self.session().model_string}")
            return
        name = args[0]
        self.app.notice(f"checking model {name}…")

        def check() -> str:
            self.session().set_model(name)  # the model check may ask the network: not on this thread
            return name

        def done(name: str) -> None:
            self.app.notice(f"model is now {name} for the next turns")
            self.app.refresh_status()

        self.app.start_work("checking model", check, done)

    def cmd_mode(self, args: list[str], raw: str) -> None:
        if not args:
            self.app.notice(f"permission mode: {self.session().mode} (ask, accept-edits or yolo)")
            return
        self.session().set_mode(args[0])
        self.app.notice(f"permission mode is now {args[0]}")
        self.app.refresh_status()

    def cmd_clear(self, args: list[str], raw: str) -> None:
        self.app.conversation.clear()
        self.app.notice("cleared the screen; the transcript keeps everything")

    def cmd_diff(self, args: list[str], raw: str) -> None:
        d = self.session().session_diff()
        if d is None:
            self.app.notice(f"{self.session().root} is not a git repository, so there is no diff to show", "warning")
            return
        since = f"commit {d.base[:10]}" if d.base else "an empty repository"
        if d.patch.strip():
            self.app.notice(f"what this session changed since it started ({since}; new files included):")
            self.app.add(Static(render.diff_view(d.patch), classes="diff"))
        else:
            self.app.notice(f"this session has not changed the repository since it started ({since})")
        if d.left_out:
            shown = ", ".join(d.left_out[:8]) + (f" and {len(d.left_out) - 8} more" if len(d.left_out) > 8 else "")
            self.app.notice(
                f"left out {len(d.left_out)} files that already had uncommitted changes when the session "
                f"started: {shown}",
                "warning",
            )

    def _judge_last(self, tool: str) -> None:
        """/verify or /profile: the latest /optimize session's candidate judged again, its card shown."""
        harness, sid = self.session().harness_for_last()

        def show(judged: HarnessResultEvent) -> None:
            self.app.show_result(sid, judged)
            self.app.refresh_status()

        self.app.notice(f"{tool.lower()}ing the candidate of session {sid}…")
        self.app.start_work(tool.lower(), lambda: self.session().judge(harness, tool), show)

    def cmd_verify(self, args: list[str], raw: str) -> None:
        self._judge_last("Verify")

    def cmd_profile(self, args: list[str], raw: str) -> None:
        self._judge_last("Profile")

    def cmd_sessions(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.agent.session_store import list_sessions

        found = list_sessions(self.session().opts.data_dir)[:20]
        if not found:
            self.app.notice("no stored sessions")
            return
        from rich.table import Table

        table = Table(box=None, padding=(0, 2), show_header=True)
        for col in ("id", "kind", "date", "target", "status", "turns", "cost"):
            table.add_column(col)
        for s in found:
            row = (s.session_id, s.kind, s.created.replace("T", " "), s.target[:40], s.status, str(s.turns))
            table.add_row(*(Text(v) for v in (*row, f"${s.cost_usd:.4f}")))
        self.app.add(Static(table, classes="notice"))
        self.app.notice("/resume ID opens a chat session")

    def cmd_resume(self, args: list[str], raw: str) -> None:
        if not args:
            raise BadInput("/resume needs a session id", "/sessions lists them")
        old = self.session()
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
        self.app.notice(f"opening session {args[0]}…")

        def opened(new: ChatSession) -> None:
            old.close()
            self.switch_session(new)

        # Opening a session checks its model and sandbox: seconds, so not on this thread.
        self.app.start_work("opening session", lambda: ChatSession(opts), opened)

    def cmd_export(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.chat.export import export_transcript

        rt = self.session()
        dest = Path(args[0]).expanduser() if args else rt.state.session_dir / "transcript.md"
        if not dest.is_absolute():
            dest = rt.root / dest
        export_transcript(rt.state.transcript_path, dest, f"cuda-agent chat {rt.session_id}")
        self.app.notice(f"exported the conversation to {dest}")

    def cmd_compact(self, args: list[str], raw: str) -> None:
        self.app.notice(self.session().compact())
        self.app.refresh_status()

    def cmd_undo(self, args: list[str], raw: str) -> None:
        self.app.lasting_notice(self.session().undo())
        self.app.ledger_panel.show(self.session().ledger)  # an undone kernel is no longer the best
        self.app.refresh_status()

    def cmd_ledger(self, args: list[str], raw: str) -> None:
        self.app.action_toggle_ledger()

    def cmd_optimize(self, args: list[str], raw: str) -> None:
        commands.parse_optimize_args(args)  # a bad line is refused before anything starts
        self.app.add(UserTurn("/optimize " + raw))
        self.session().record_note("/optimize " + raw, "user")
        session, work = self.session(), self.app.work

        def run() -> OptimizeOutcome:
            return session.optimize(args, work.tell, work.cancel)

        self.app.start_work("optimizing", run, self.review_optimize)
