"""The chat's slash commands on screen: `run_command` parses a typed line, holds back a command
that waits while the agent works, and calls the handler of its row of `chat.commands.COMMANDS`
(`handlers`, one a row); each handler asks the chat session and shows what came back.
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
from cuda_agent_cli.tui.agent_app import AgentApp
from cuda_agent_cli.tui.widgets import UserTurn

if TYPE_CHECKING:
    from cuda_agent_cli.agent.events import HarnessResultEvent
    from cuda_agent_cli.run.optimize import OptimizeOutcome

Handler = Callable[[list[str], str], None]  # (the arguments, the line after the name as typed)


class SlashCommands(AgentApp[ChatSession]):
    """The chat app's commands, one handler (args, raw_args) per row of the table."""

    def handlers(self) -> dict[str, Handler]:
        """The handler of each command of `chat.commands.COMMANDS`, by name."""
        return {
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

    def check_handlers(self) -> None:
        """The table and the handlers are kept together: a row without one fails the app's start."""
        names = [c.name for c in commands.COMMANDS]
        handled = self.handlers()
        unhandled = [n for n in names if n not in handled]
        unknown = [n for n in handled if n not in names]
        if unhandled or unknown:
            raise TypeError(f"slash commands without a handler: {unhandled}; handlers without a command: {unknown}")

    def run_command(self, line: str) -> None:
        try:
            parsed = commands.parse(line)
        except commands.UnknownCommand as exc:
            self.notice(str(exc), "error")
            return
        cmd = parsed.command
        if self.busy and not cmd.while_busy:
            self.notice(f"/{cmd.name} cannot run while the agent works — wait, or press Esc to interrupt", "warning")
            return
        handler = self.handlers()[cmd.name]
        try:
            handler(parsed.args, parsed.raw_args)
        except CudaAgentError as exc:
            self.notice(exc.one_line(), "error")

    def cmd_help(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.tui.screens import HelpScreen

        self.push_screen(HelpScreen())

    def cmd_quit(self, args: list[str], raw: str) -> None:
        self.quit_saving()

    def cmd_cost(self, args: list[str], raw: str) -> None:
        rt = self.runtime
        lines = [f"this chat: ${rt.state.cost_usd:.4f} over {rt.state.turns} turns, {rt.tokens:,} tokens in all"]
        for sid, cost in rt.session_costs.items():
            if sid != rt.session_id:
                lines.append(f"optimize session {sid}: ${cost:.4f}")
        self.notice("\n".join(lines))

    def cmd_context(self, args: list[str], raw: str) -> None:
        rt = self.runtime
        pct = 100.0 * rt.context_tokens / (rt.context_budget or 1)
        self.notice(
            f"context: about {rt.context_tokens:,} of {rt.context_budget:,} tokens ({pct:.0f}%); "
            f"{len(rt.state.messages)} messages, {rt.state.compactions} compactions. /compact frees room."
        )

    def cmd_model(self, args: list[str], raw: str) -> None:
        if not args:
            self.notice(f"model: {self.runtime.model_string}")
            return
        name = args[0]
        self.notice(f"checking model {name}…")

        def check() -> str:
            self.runtime.set_model(name)  # the model check may ask the network: not on this thread
            return name

        def done(name: str) -> None:
            self.notice(f"model is now {name} for the next turns")
            self.refresh_status()

        self.start_work("checking model", check, done)

    def cmd_mode(self, args: list[str], raw: str) -> None:
        if not args:
            self.notice(f"permission mode: {self.runtime.mode} (ask, accept-edits or yolo)")
            return
        self.runtime.set_mode(args[0])
        self.notice(f"permission mode is now {args[0]}")
        self.refresh_status()

    def cmd_clear(self, args: list[str], raw: str) -> None:
        self.conversation.clear()
        self.notice("cleared the screen; the transcript keeps everything")

    def cmd_diff(self, args: list[str], raw: str) -> None:
        d = self.runtime.session_diff()
        if d is None:
            self.notice(f"{self.runtime.root} is not a git repository, so there is no diff to show", "warning")
            return
        since = f"commit {d.base[:10]}" if d.base else "an empty repository"
        if d.patch.strip():
            self.notice(f"what this session changed since it started ({since}; new files included):")
            self.add(Static(render.diff_view(d.patch), classes="diff"))
        else:
            self.notice(f"this session has not changed the repository since it started ({since})")
        if d.left_out:
            shown = ", ".join(d.left_out[:8]) + (f" and {len(d.left_out) - 8} more" if len(d.left_out) > 8 else "")
            self.notice(
                f"left out {len(d.left_out)} files that already had uncommitted changes when the session "
                f"started: {shown}",
                "warning",
            )

    def _judge_last(self, tool: str) -> None:
        """/verify or /profile: the latest /optimize session's candidate judged again, its card shown."""
        harness, sid = self.runtime.harness_for_last()

        def show(judged: HarnessResultEvent) -> None:
            self.show_result(sid, judged)
            self.refresh_status()

        self.notice(f"{tool.lower()}ing the candidate of session {sid}…")
        self.start_work(tool.lower(), lambda: self.runtime.judge(harness, tool), show)

    def cmd_verify(self, args: list[str], raw: str) -> None:
        self._judge_last("Verify")

    def cmd_profile(self, args: list[str], raw: str) -> None:
        self._judge_last("Profile")

    def cmd_sessions(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.agent.session_store import list_sessions

        found = list_sessions(self.runtime.opts.data_dir)[:20]
        if not found:
            self.notice("no stored sessions")
            return
        from rich.table import Table

        table = Table(box=None, padding=(0, 2), show_header=True)
        for col in ("id", "kind", "date", "target", "status", "turns", "cost"):
            table.add_column(col)
        for s in found:
            row = (s.session_id, s.kind, s.created.replace("T", " "), s.target[:40], s.status, str(s.turns))
            table.add_row(*(Text(v) for v in (*row, f"${s.cost_usd:.4f}")))
        self.add(Static(table, classes="notice"))
        self.notice("/resume ID opens a chat session")

    def cmd_resume(self, args: list[str], raw: str) -> None:
        if not args:
            raise BadInput("/resume needs a session id", "/sessions lists them")
        old = self.runtime
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
        self.notice(f"opening session {args[0]}…")

        def opened(new: ChatSession) -> None:
            old.close()
            self.runtime = new
            self.conversation.clear()
            from cuda_agent_cli.tui.completions import Completions

            for box in self.query("#completions").results(Completions):
                box.files = None  # the repository's files are listed afresh
            self.show_opening()
            self.ledger_panel.show(new.ledger)
            self.refresh_status()

        # Opening a session checks its model and sandbox: seconds, so not on this thread.
        self.start_work("opening session", lambda: ChatSession(opts), opened)

    def cmd_export(self, args: list[str], raw: str) -> None:
        from cuda_agent_cli.chat.export import export_transcript

        rt = self.runtime
        dest = Path(args[0]).expanduser() if args else rt.state.session_dir / "transcript.md"
        if not dest.is_absolute():
            dest = rt.root / dest
        export_transcript(rt.state.transcript_path, dest, f"cuda-agent chat {rt.session_id}")
        self.notice(f"exported the conversation to {dest}")

    def cmd_compact(self, args: list[str], raw: str) -> None:
        self.notice(self.runtime.compact())
        self.refresh_status()

    def cmd_undo(self, args: list[str], raw: str) -> None:
        self.lasting_notice(self.runtime.undo())
        self.ledger_panel.show(self.runtime.ledger)  # an undone kernel is no longer the best
        self.refresh_status()

    def cmd_ledger(self, args: list[str], raw: str) -> None:
        self.action_toggle_ledger()

    def cmd_optimize(self, args: list[str], raw: str) -> None:
        commands.parse_optimize_args(args)  # a bad line is refused before anything starts
        self.add(UserTurn("/optimize " + raw))
        self.runtime.record_note("/optimize " + raw, "user")
        self.runtime.permissions.ask = self.ask

        def run() -> OptimizeOutcome:
            return self.runtime.optimize(
                args, self.sink, self.cancel, on_stage=lambda msg: self._post(self.notice, msg)
            )

        self.start_work("optimizing", run, self.review)
