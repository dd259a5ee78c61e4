"""The chat's screens: approval of a write or command, the kernel review, and help."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
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


CHOICES = ("once", "session", "deny", "instruct")  # the buttons, left to right


class ApprovalScreen(ModalScreen[Decision | None]):
    """Allow once, allow for this session, deny, or deny with an instruction for the agent.

    Typed text never answers it. A choice is highlighted with Tab, Shift+Tab or the arrows and
    taken with Enter, or clicked; Esc denies. Nothing is highlighted when it opens, and the first
    highlight is "Allow once" (or, going left, "Deny + instruct"), so allowing for the whole
    session is always a step further. What is typed while it shows goes to the prompt under it
    (`Typed`; Enter too while nothing is highlighted), so a message typed as the question opened
    is kept, and sent or queued as while the agent works; typing also takes the highlight off,
    so the Enter that ends a line answers nothing. For `GRACE_S` after it opens no choice is
    taken at all (keys typed ahead, a click), and the hint line always says how to choose.
    Dismissed with None when the question is withdrawn (`withdraw`)."""

    class Typed(Message):
        """Typed while the question showed, for the prompt: `key` is enter, backspace, or what
        brought `text` (a printable key, a paste)."""

        def __init__(self, key: str, text: str | None) -> None:
            super().__init__()
            self.key = key
            self.text = text

    GRACE_S = 0.45
    AUTO_FOCUS = "#approval-body"
    BINDINGS = [
        Binding("ctrl+t", "toggle_view", "Unified / side by side", show=False),
        Binding("escape", "take('deny')", "Deny", show=False),
    ]

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__()
        self.request = request
        self.side = False
        self.armed = False  # whether choices are taken yet (after GRACE_S)
        self.small = False  # the terminal is too small to show the request: nothing answers it
        self.typed = False  # something typed here went to the prompt
        self._withdrawn = False

    def compose(self) -> ComposeResult:
        r = self.request
        with Vertical(id="approval"):
            yield Static(Text(f"Allow {r.summary}?", style="bold"), id="approval-title")
            with VerticalScroll(id="approval-body"):
                yield Static(render.approval_body(r, self.side), id="approval-diff")
            yield Input(placeholder="What should the agent do instead? (Enter sends)", id="approval-instruction")
            with Horizontal(id="approval-buttons"):
                # Disabled through the grace: they can be neither highlighted nor clicked yet.
                yield Button("Allow once", id="once", variant="success", disabled=True)
                yield Button(
                    f"Allow {session_grant(r, short=True)} this session", id="session", variant="primary", disabled=True
                )
                yield Button("Deny", id="deny", variant="error", disabled=True)
                yield Button("Deny + instruct", id="instruct", variant="warning", disabled=True)
            yield Static(self._hint(), id="approval-hint")
        yield too_small_message()

    def picked(self) -> str | None:
        """The highlighted choice, if any."""
        focused = self.focused
        return focused.id if isinstance(focused, Button) else None

    def _hint(self) -> Text:
        """How to choose, and where typing goes."""
        if not self.armed:
            return Text("the choices open in a moment · typing goes to the prompt", style="dim")
        picked = self.picked()
        if picked is not None:
            what = {
                "once": "allow this once",
                "session": f"allow {session_grant(self.request)} for the rest of this session",
                "deny": "deny",
                "instruct": "deny and say what to do instead",
            }[picked]
            return Text(f"Enter: {what} · Esc denies", style="dim")
        view = f" · Ctrl+T: {'unified' if self.side else 'side by side'}" if self.request.new is not None else ""
        typed = "typed text went to the prompt" if self.typed else "typing goes to the prompt"
        return Text(f"Tab or ←/→ picks, Enter takes it · Esc denies{view} · {typed}", style="dim")

    def _show_hint(self) -> None:
        self.query_one("#approval-hint", Static).update(self._hint())

    def on_mount(self) -> None:
        self.query_one("#approval-instruction", Input).display = False
        self.set_timer(self.GRACE_S, self._arm)
        self.small = guard_size(self, "#approval")

    def on_resize(self, event: Any) -> None:
        self.small = guard_size(self, "#approval")

    def on_screen_resume(self) -> None:
        if self._withdrawn:
            self.dismiss(None)

    def _arm(self) -> None:
        self.armed = True
        for button in self.query(Button):
            button.disabled = False
        self._show_hint()

    def withdraw(self) -> None:
        """The question was withdrawn (the turn was interrupted): close without an answer, now
        or once it is on top again."""
        self._withdrawn = True
        if self.is_current:
            self.dismiss(None)

    def on_key(self, event: events.Key) -> None:
        """Keys reaching the screen from what has the focus, before any binding takes them."""
        if isinstance(self.focused, Input):
            return  # the instruction is being typed: its keys are its own
        key = event.key
        if key in ("tab", "right", "shift+tab", "left"):
            self._pick(1 if key in ("tab", "right") else -1)
        elif key == "enter":
            picked = self.picked()
            if picked is None:
                self.post_message(self.Typed("enter", None))
            else:
                self.action_take(picked)
        elif key == "backspace" or (event.is_printable and event.character):
            self._type(key, event.character)
        else:
            return
        event.stop()
        event.prevent_default()

    def on_paste(self, event: events.Paste) -> None:
        if isinstance(self.focused, Input):
            return
        event.stop()
        self._type("paste", event.text)

    def _type(self, key: str, text: str | None) -> None:
        if self.picked() is not None:
            self.query_one("#approval-body").focus()  # the highlight goes: the Enter after this answers nothing
        self.typed = True
        self.post_message(self.Typed(key, text))
        self._show_hint()

    def _pick(self, step: int) -> None:
        if not self.armed or self.small:
            return
        picked = self.picked()
        if picked is None:
            i = 0 if step > 0 else len(CHOICES) - 1
        else:
            i = min(max(CHOICES.index(picked) + step, 0), len(CHOICES) - 1)
        self.query_one(f"#{CHOICES[i]}", Button).focus()
        self._show_hint()

    def on_descendant_focus(self, _event: Any) -> None:
        if self.is_mounted:
            self._show_hint()

    def action_take(self, choice: str) -> None:
        if not self.armed or self.small:
            return
        if choice == "instruct":
            box = self.query_one("#approval-instruction", Input)
            box.display = True
            box.focus()
            return
        self.dismiss(Decision(choice))  # type: ignore[arg-type]

    def action_toggle_view(self) -> None:
        self.side = not self.side
        self.query_one("#approval-diff", Static).update(render.approval_body(self.request, self.side))
        self._show_hint()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_take(event.button.id or "deny")

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
