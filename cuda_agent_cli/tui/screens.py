"""The chat's screens: approval of a write or command, the kernel review, and help."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Static

from cuda_agent_cli.chat.approval import ApprovalRequest, Decision, session_grant
from cuda_agent_cli.chat.commands import COMMANDS
from cuda_agent_cli.tui import render

KEYS_HELP = [
    ("Enter", "send the message (queued while the agent works)"),
    ("Ctrl+J", "new line in the prompt"),
    ("Up / Down", "previous / next message from the history"),
    ("Ctrl+R", "search the history for what is typed"),
    ("Tab", "accept the highlighted completion (/command or @file)"),
    ("Shift+Tab / Tab", "from the prompt: to the newest tool call (Tab when no completion is shown)"),
    ("Up / Down", "on a tool call: the one above / below (Shift+Tab / Tab too); below the newest: the prompt"),
    ("Enter / Space", "on a tool call: show or hide its output; typing goes back to the prompt"),
    ("Esc", "interrupt the running turn (what was done is kept)"),
    ("Ctrl+L / F2", "show or hide the kernel ledger"),
    ("Ctrl+C twice", "quit (the session is saved)"),
    ("@path#10-40", "attach a file (or lines of it) to the message"),
    ("!cmd", "run a shell command in the sandbox"),
]


def guard_size(screen: Screen[Any], content: str) -> bool:
    """The main screen's "terminal too small" message on a pushed screen too: `content` (a
    selector) is hidden and the message shown while the terminal is below the minimum size;
    called when the screen mounts and on each resize."""
    w, h = screen.app.size
    small = render.is_too_small(w, h)
    found = screen.query("#screen-too-small")
    if not found:
        return small
    msg = found.first(Static)
    msg.display = small
    for widget in screen.query(content):
        widget.display = not small
    if small:
        msg.update(render.too_small(w, h, getattr(screen.app, "NAME", "cuda-agent")))
    return small


def too_small_message() -> Static:
    msg = Static(id="screen-too-small")
    msg.display = False
    return msg


class ApprovalScreen(ModalScreen[Decision]):
    """Allow once, allow for this session, deny, or deny with an instruction for the agent.

    The modal opens while the user may still be typing their next message, so for `GRACE_S`
    after it opens every choice (keys, Enter on a button, a click) is swallowed: nothing typed
    in that moment answers it or reaches the prompt. No button has the focus at first, so a
    late Enter answers nothing either, and the session-wide choice says what it grants."""

    GRACE_S = 0.45
    AUTO_FOCUS = "#approval-body"
    BINDINGS = [
        Binding("1,y", "choose('once')", "Allow once"),
        Binding("2,a", "choose('session')", "Allow for session"),
        Binding("3,n", "choose('deny')", "Deny"),
        Binding("4,i", "instruct", "Deny with instruction"),
        Binding("t", "toggle_view", "Unified / side by side"),
        Binding("escape", "choose('deny')", "Deny", show=False),
    ]

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__()
        self.request = request
        self.side = False
        self.armed = False  # whether the choices answer yet (after GRACE_S)
        self.small = False  # the terminal is too small to show the request: nothing answers it

    def compose(self) -> ComposeResult:
        r = self.request
        with Vertical(id="approval"):
            yield Static(Text(f"Allow {r.summary}?", style="bold"), id="approval-title")
            with VerticalScroll(id="approval-body"):
                yield Static(render.approval_body(r, self.side), id="approval-diff")
            yield Input(placeholder="What should the agent do instead? (Enter sends)", id="approval-instruction")
            with Horizontal(id="approval-buttons"):
                yield Button("1 Allow once", id="once", variant="success")
                yield Button(f"2 Allow {session_grant(r, short=True)} this session", id="session", variant="primary")
                yield Button("3 Deny", id="deny", variant="error")
                yield Button("4 Deny + instruct", id="instruct", variant="warning")
            yield Static(self._hint(), id="approval-hint")
        yield too_small_message()

    def _hint(self) -> Text:
        if not self.armed:
            return Text("keys paused for a moment, so typing does not answer by accident…", style="dim")
        hint = "t: unified / side by side · " if self.request.new is not None else ""
        return Text(hint + "keys 1-4 (y/a/n/i)", style="dim")

    def on_mount(self) -> None:
        self.query_one("#approval-instruction", Input).display = False
        self.set_timer(self.GRACE_S, self._arm)
        self.small = guard_size(self, "#approval")

    def on_resize(self, event: Any) -> None:
        self.small = guard_size(self, "#approval")

    def _arm(self) -> None:
        self.armed = True
        self.query_one("#approval-hint", Static).update(self._hint())

    def action_choose(self, choice: str) -> None:
        # While the instruction is typed the Input takes the letters, so this is a real choice.
        if self.armed and not self.small:
            self.dismiss(Decision(choice))  # type: ignore[arg-type]

    def action_instruct(self) -> None:
        if not self.armed or self.small:
            return
        box = self.query_one("#approval-instruction", Input)
        box.display = True
        box.focus()

    def action_toggle_view(self) -> None:
        if not self.armed:
            return
        self.side = not self.side
        self.query_one("#approval-diff", Static).update(render.approval_body(self.request, self.side))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "instruct":
            self.action_instruct()
        elif self.armed and not self.small:
            self.dismiss(Decision(event.button.id))  # type: ignore[arg-type]

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(Decision("instruct", event.value))


class ReviewScreen(Screen[bool]):
    """The speedup table and the full diff, before anything is written: y applies, n discards."""

    BINDINGS = [
        Binding("y", "decide(True)", "Apply"),
        Binding("n,escape", "decide(False)", "Discard"),
    ]

    def __init__(self, outcome: Any, refused: str | None = None) -> None:
        super().__init__()
        self.outcome = outcome
        # Why `y` cannot apply here (e.g. --no-apply); None: only a measured improvement may land.
        self.refused = refused

    def compose(self) -> ComposeResult:
        o = self.outcome
        plan = o.plan
        from cuda_agent_cli.writeback.diff import diff_stats

        files, added, removed = diff_stats(plan.changes)
        with VerticalScroll(id="review"):
            yield Static(Text(f"Review: {o.target} — session {o.session_id}", style="bold"), id="review-title")
            yield Static(render.speedup_table(o.result, o.device), id="review-table")
            yield Static(render.review_facts(o.result, o.device), id="review-facts")
            yield Static(render.review_more(o), id="review-more")
            where = f"branch {plan.branch}" if plan.in_git else "no git: files are written, not committed"
            yield Static(
                Text(f"{files} files, +{added} -{removed} lines in {plan.repo_root} ({where})"), id="review-stats"
            )
            yield Static(render.diff_view(plan.patch), id="review-diff")
        if self.refused:
            keys = f"n: close — {self.refused}"
        elif o.status == "improved":
            keys = "y: apply (branch, commit, manifest) · n: discard"
        elif o.result is not None and o.result.timings is None:
            keys = "n: close — correct but not timed (no Profile of it finished), so it is not applied"
        else:
            keys = "n: close — correct but not faster than eager PyTorch, so it is not applied"
        yield Static(Text(keys, style="bold"), id="review-keys")
        yield too_small_message()

    def on_mount(self) -> None:
        guard_size(self, "#review, #review-keys")

    def on_resize(self, event: Any) -> None:
        guard_size(self, "#review, #review-keys")

    def action_decide(self, apply: bool) -> None:
        if apply and self.refused:
            self.notify(self.refused, severity="warning")
            return
        self.dismiss(apply)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        cmds = Table(title="Commands", title_justify="left", title_style="bold", box=None, padding=(0, 2, 0, 0))
        cmds.add_column("command", style="bold cyan", max_width=38)  # /optimize's flags wrap
        cmds.add_column("what it does")
        cmds.add_column("while busy", justify="center")
        for c in COMMANDS:
            cmds.add_row(
                Text(f"/{c.name} {c.usage}".rstrip()),
                Text(c.description),
                Text("yes", "green") if c.while_busy else Text("waits", "yellow"),
            )
        keys = Table(title="Keys", title_justify="left", title_style="bold", box=None, padding=(0, 2, 0, 0))
        keys.add_column("key", style="bold", no_wrap=True)
        keys.add_column("what it does")
        for k, v in KEYS_HELP:
            keys.add_row(Text(k), Text(v))
        with VerticalScroll(id="help"):
            yield Static(cmds)
            yield Static(keys, id="help-keys")
            yield Static(Text("Esc closes this help.", style="dim"))
        yield too_small_message()

    def on_mount(self) -> None:
        guard_size(self, "#help")

    def on_resize(self, event: Any) -> None:
        guard_size(self, "#help")

    def action_close(self) -> None:
        self.dismiss(None)
